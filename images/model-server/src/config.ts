import { z } from 'zod';
import { DEFAULT_BODY_IDLE_TIMEOUT_MS } from '../../service-kit/src/body-idle.js';
import { env, loadConfig } from '../../service-kit/src/config.js';
import { allowedHosts, allowedHostsEnv } from '../../service-kit/src/loopback-guard.js';
import { DEFAULT_READER_IDLE_TIMEOUT_MS } from '../../service-kit/src/reader-idle.js';
import { trustProxyEnv } from '../../service-kit/src/trusted-proxies.js';
import type { ModelServerOptions } from './app.js';

export const modelServerEnvSchema = z.object({
  /** TCP port (takes precedence over PORT). */
  MODEL_SERVER_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  PORT: env.port(8000),
  /** Interface to listen on. */
  MODEL_SERVER_HOST: z.string().default('0.0.0.0'),
  ...allowedHostsEnv,
  ...trustProxyEnv,
  /** Folder of one model's weights (named by MODEL_NAMES, else by this path); unset: the built-in models (strata-verse and strata-tiny, or those MODEL_NAMES names). */
  MODEL_DIR: z.string().min(1).optional(),
  /** Comma-separated names the model in MODEL_DIR answers to; without MODEL_DIR, built-in models to serve (each loads its own weights). */
  MODEL_NAMES: z.string().optional(),
  /** Comma-separated keys; when set, /v1 requests need `Authorization: Bearer <one of them>`. */
  MODEL_SERVER_API_KEYS: z.string().optional(),
  /** Continuous batching of concurrent requests (off: one request at a time). */
  MODEL_SERVER_BATCHING: env.bool(true),
  /** Most sequences decoded together in one step. @tuning */
  MODEL_SERVER_MAX_BATCH: env.int(32, 1, 256),
  /** How long a new request waits for others to join its batch, ms. @tuning */
  MODEL_SERVER_BATCH_WINDOW_MS: env.int(3, 0, 1000),
  /** Most queued requests admitted into a running batch at one step. @tuning */
  MODEL_SERVER_ADMISSION_WAVE: env.int(8, 1, 256),
  /** Requests waiting beyond this are answered 429. */
  MODEL_SERVER_MAX_QUEUE: env.int(256, 1, 100_000),
  /** Most sequences (waiting and decoding) one caller (an API key; without keys, a client address, from X-Forwarded-For when STRATA_TRUST_PROXY trusts the peer) may hold; unset: half of MAX_QUEUE + MAX_BATCH. */
  MODEL_SERVER_MAX_QUEUE_PER_CALLER: z.coerce.number().int().min(1).max(100_000).optional(),
  /** Largest request body, bytes (413 past it). */
  MODEL_SERVER_MAX_BODY_BYTES: env.int(1024 * 1024, 1024, 100 * 1024 * 1024),
  /** A request body that sends nothing this long, ms, is answered 408 request_timeout and its connection closed (0: no limit). */
  MODEL_SERVER_BODY_IDLE_TIMEOUT_MS: env.int(DEFAULT_BODY_IDLE_TIMEOUT_MS, 0, 3_600_000),
  /** An answer its client reads nothing of this long, ms, is cut with its connection (0: never). */
  MODEL_SERVER_READER_IDLE_TIMEOUT_MS: env.int(DEFAULT_READER_IDLE_TIMEOUT_MS, 0, 3_600_000),
  /** ONNX Runtime intra-op threads (0: its own default). @tuning */
  MODEL_SERVER_THREADS: env.int(1, 0, 64),
  // On by default: the built-in models have a 64-token context, shorter than many chat prompts (the
  // poem app's included); the end of the prompt (the last user message) is what they read.
  /** Keep the end of a prompt longer than the context instead of answering 400 context_length_exceeded (false: refuse, as vLLM does). */
  MODEL_SERVER_TRUNCATE_PROMPT: env.bool(true),
  /** Unset: the default (the generation engine in a worker thread); the option is then left out. @tuning */
  MODEL_SERVER_WORKER: z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .optional()
    .transform((v) => (v === undefined ? undefined : v === 'true' || v === '1' || v === 'yes')),
  /** Set by the operator for ModelServers that ask for a GPU. */
  STRATA_EXECUTION_PROVIDER: z.enum(['cpu', 'cuda']).default('cpu'),
});

/** Options from the environment (MODEL_SERVER_PORT, or PORT, default 8000; see README "Model server"). */
export function modelServerConfigFromEnv(source: NodeJS.ProcessEnv = process.env): ModelServerOptions {
  const c = loadConfig('model-server', modelServerEnvSchema, source);
  return {
    port: c.MODEL_SERVER_PORT ?? c.PORT,
    host: c.MODEL_SERVER_HOST,
    ...(c.MODEL_DIR ? { modelDir: c.MODEL_DIR } : {}),
    ...(c.MODEL_NAMES ? { modelNames: list(c.MODEL_NAMES) } : {}),
    ...(c.MODEL_SERVER_API_KEYS ? { apiKeys: list(c.MODEL_SERVER_API_KEYS) } : {}),
    ...(c.STRATA_ALLOWED_HOSTS ? { allowedHosts: allowedHosts(c.STRATA_ALLOWED_HOSTS) } : {}),
    ...(c.STRATA_TRUST_PROXY ? { trustProxy: c.STRATA_TRUST_PROXY } : {}),
    batching: c.MODEL_SERVER_BATCHING,
    maxBatch: c.MODEL_SERVER_MAX_BATCH,
    batchWindowMs: c.MODEL_SERVER_BATCH_WINDOW_MS,
    admissionWave: c.MODEL_SERVER_ADMISSION_WAVE,
    maxQueue: c.MODEL_SERVER_MAX_QUEUE,
    ...(c.MODEL_SERVER_MAX_QUEUE_PER_CALLER === undefined ? {} : { maxQueuePerCaller: c.MODEL_SERVER_MAX_QUEUE_PER_CALLER }),
    maxBodyBytes: c.MODEL_SERVER_MAX_BODY_BYTES,
    bodyIdleTimeoutMs: c.MODEL_SERVER_BODY_IDLE_TIMEOUT_MS,
    readerIdleTimeoutMs: c.MODEL_SERVER_READER_IDLE_TIMEOUT_MS,
    threads: c.MODEL_SERVER_THREADS,
    truncatePrompt: c.MODEL_SERVER_TRUNCATE_PROMPT,
    executionProvider: c.STRATA_EXECUTION_PROVIDER,
    ...(c.MODEL_SERVER_WORKER === undefined ? {} : { worker: c.MODEL_SERVER_WORKER }),
  };
}

function list(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
