import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake upstream received for one chat-completions call. */
export interface ReceivedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  body: {
    model?: string;
    messages?: Array<{ role: string; content: string }>;
    max_tokens?: number;
    [key: string]: unknown;
  };
}

/** How the fake answers the next requests: a poem, an HTTP error, or never (to exercise timeouts). */
export type FakeBehaviour =
  | { kind: 'poem'; content: string | ((req: ReceivedRequest) => string); delayMs?: number }
  | { kind: 'error'; status: number; message: string; code?: string }
  | { kind: 'hang' };

export interface FakeOpenAI {
  /** Base URL including /v1, as an OpenAI client expects. */
  baseUrl: string;
  received: ReceivedRequest[];
  /** Requests whose connection the client closed while the fake was still holding them ("hang"). */
  readonly abandoned: number;
  behave(behaviour: FakeBehaviour): void;
  /** What GET /v1/models/{id} answers (beside id and object); unset: 404, as a provider without that route. */
  modelInfo?: Record<string, unknown>;
  /** GET /v1/models/{id} requests seen (kept apart from `received`, which holds completions). */
  modelLookups: number;
  close(): Promise<void>;
}

/**
 * A well-behaved poet: answers the number of lines the last user message asks for ("of N lines", or
 * "next N lines" in a follow-up), each line distinct (numbered past the lines of the poem so far),
 * made by `line` from its number and the theme (the last quoted text).
 */
export function linesAsked(line: (n: number, theme: string) => string = (n, theme) => `line ${n} of a poem on ${theme}`) {
  return (req: ReceivedRequest): string => {
    const messages = req.body.messages ?? [];
    const ask = [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    const count = Number(/(?:of|next) (\d+) lines/.exec(ask)?.[1] ?? 1);
    const theme = [...ask.matchAll(/"([^"]*)"/g)].at(-1)?.[1] ?? 'nothing';
    const sofar = messages.filter((m) => m.role === 'assistant').flatMap((m) => m.content.split('\n').filter(Boolean)).length;
    return Array.from({ length: count }, (_, i) => line(sofar + i + 1, theme)).join('\n');
  };
}

/**
 * A small server speaking the OpenAI chat-completions wire format (the subset the poem app uses),
 * listening on a free port. It records every request so tests can check what the app sent.
 */
export async function startFakeOpenAI(initial: FakeBehaviour = { kind: 'poem', content: linesAsked() }): Promise<FakeOpenAI> {
  let behaviour = initial;
  const received: ReceivedRequest[] = [];
  let abandoned = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const record: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        authorization: req.headers.authorization,
        body: text ? (JSON.parse(text) as ReceivedRequest['body']) : {},
      };
      if (req.method === 'GET' && req.url?.startsWith('/v1/models/')) {
        fake.modelLookups++;
        const id = decodeURIComponent(req.url.slice('/v1/models/'.length));
        if (fake.modelInfo) sendJson(res, 200, { id, object: 'model', created: 0, owned_by: 'fake', ...fake.modelInfo });
        else sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: 'invalid_request_error' } });
        return;
      }
      received.push(record);
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: 'invalid_request_error' } });
        return;
      }
      if (behaviour.kind === 'hang') {
        // Never answers; the client's timeout (or its caller's abort) must end the request.
        res.on('close', () => abandoned++);
        return;
      }
      if (behaviour.kind === 'error') {
        sendJson(res, behaviour.status, { error: { message: behaviour.message, type: 'server_error', code: behaviour.code ?? null } });
        return;
      }
      const content = typeof behaviour.content === 'function' ? behaviour.content(record) : behaviour.content;
      const answer = () =>
        sendJson(res, 200, {
          id: 'chatcmpl-fake1',
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: record.body.model ?? 'unknown',
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
          usage: { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 },
        });
      if (behaviour.delayMs) setTimeout(answer, behaviour.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const fake: FakeOpenAI = {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    received,
    modelLookups: 0,
    get abandoned() {
      return abandoned;
    },
    behave(next) {
      behaviour = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections(); // hanging requests would otherwise keep the server open
        server.close(() => resolve());
      }),
  };
  return fake;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A port on which nothing listens (bound, then released), for "connection refused". */
export async function unusedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
