import { startModelServer, type ModelServerOptions } from '../../images/model-server/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { fixtureHooks } from '../support/fixture-hooks.js';

/** Small HTTP helpers for the model-server tests. */
export interface JsonResponse {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export async function postJson(url: string, body: unknown, init: { raw?: string; contentType?: string } = {}): Promise<JsonResponse> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': init.contentType ?? 'application/json' },
    body: init.raw ?? JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

export async function getJson(url: string): Promise<JsonResponse> {
  const res = await fetch(url);
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** POST with stream: true and return every `data:` payload (the final "[DONE]" kept as a string). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function postStream(url: string, body: unknown): Promise<{ status: number; contentType: string | null; events: any[] }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  const events = text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const data = block.replace(/^data: /, '');
      return data === '[DONE]' ? data : JSON.parse(data);
    });
  return { status: res.status, contentType: res.headers.get('content-type'), events };
}

/** Reproducible prompts of content ids (10..999) that the model never trained on as such. */
export function randomPrompts(count: number, seed: number, maxLen = 12): number[][] {
  let state = seed;
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
  return Array.from({ length: count }, () => Array.from({ length: 1 + Math.floor(next() * maxLen) }, () => 10 + Math.floor(next() * 990)));
}

/** The running model server of a suite: `base` is its root URL, `url` its chat-completions URL. */
export interface SuiteModelServer {
  server: RunningService;
  base: string;
  url: string;
}

/** Starts a model server (silent, on a free local port) before the calling suite and stops it after; call inside `describe`. */
export function modelServerForSuite(options: ModelServerOptions = {}): SuiteModelServer {
  return fixtureHooks(
    'suite',
    async () => {
      const server = await startModelServer({ port: 0, host: '127.0.0.1', logger: createLogger('model-server-test', 'silent'), ...options });
      return { server, base: server.url, url: `${server.url}/v1/chat/completions` };
    },
    (fixture) => fixture.server.stop(),
  );
}
