import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger, type RunningService } from '../../../images/service-kit/src/index.js';
import { fixtureHooks } from '../../support/fixture-hooks.js';
import { startFakeOpenAI, type FakeOpenAI } from './fake-openai.js';
import { startPoemApp } from '../../../images/poem-app/src/app.js';
import type { PoemAppConfig, UpstreamConfig } from '../../../images/poem-app/src/config.js';

export const TEST_API_KEY = 'sk-strata-test-key';
export const TEST_MODEL = 'strata-test-model';

/** A unique temp folder for one suite's SQLite file; remove() deletes it. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `strata-${prefix}-`));
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Start the real poem app on a free port against the given SQLite file and upstream (`app`: more of its settings). */
export function startTestPoemApp(
  databasePath: string,
  upstreamBaseUrl: string,
  upstream: Partial<UpstreamConfig> = {},
  app: Partial<PoemAppConfig> = {},
): Promise<RunningService> {
  return startPoemApp({
    ...app,
    port: 0,
    host: '127.0.0.1',
    databasePath,
    logger: createLogger('poem-app-test', 'silent'),
    upstream: {
      baseUrl: upstreamBaseUrl,
      apiKey: TEST_API_KEY,
      model: TEST_MODEL,
      timeoutMs: 5_000,
      maxRetries: 0,
      maxTokens: 128,
      temperature: 0.9,
      ...upstream,
    },
  });
}

/** Parsed JSON from the app; tests inspect it freely. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

/** POST a JSON body (or raw text with its own content type) and return status and parsed JSON. */
export async function postJson(
  url: string,
  body: unknown,
  init: { raw?: string; contentType?: string; signal?: AbortSignal } = {},
): Promise<{ status: number; body: Json }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': init.contentType ?? 'application/json' },
    body: init.raw ?? JSON.stringify(body),
    signal: init.signal,
  });
  return { status: response.status, body: await response.json() };
}

export async function getJson(url: string): Promise<{ status: number; body: Json }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.json() };
}

export interface PoemAppOnFakeUpstream {
  upstream: FakeOpenAI;
  app: RunningService;
  /** The temp folder of the app's SQLite file (poems.db). */
  dir: string;
}

/** Registers hooks that start a fake OpenAI upstream and the poem app on it (a fresh database) before the suite, and stop them after. */
export function poemAppOnFakeUpstream(prefix: string, upstream: Partial<UpstreamConfig> = {}): PoemAppOnFakeUpstream {
  return fixtureHooks(
    'suite',
    async () => {
      const tmp = tempDir(prefix);
      const fake = await startFakeOpenAI();
      const app = await startTestPoemApp(path.join(tmp.dir, 'poems.db'), fake.baseUrl, upstream);
      return { upstream: fake, app, dir: tmp.dir, remove: tmp.remove };
    },
    async (f) => {
      await f.app.stop();
      await f.upstream.close();
      f.remove();
    },
  );
}
