import { z } from 'zod';
import {
  allowedHosts,
  allowedHostsEnv,
  DEFAULT_BODY_IDLE_TIMEOUT_MS,
  DEFAULT_READER_IDLE_TIMEOUT_MS,
  env,
  loadConfig,
  trustProxyEnv,
} from '../../service-kit/src/index.js';
import { parseDatabaseUrl } from './database-url.js';

/** Everything the poem app needs to run; `startPoemApp` takes this (tests and standalone build it directly). */
export interface PoemAppConfig {
  port: number;
  host?: string;
  /** SQLite file path (or ":memory:"), already parsed from DATABASE_URL. */
  databasePath: string;
  upstream: UpstreamConfig;
  logLevel?: string;
  /** Serve the page without HTTP caching (development). */
  production?: boolean;
  /** Key that history writes (save, delete) need; unset: writes are open on loopback only. */
  apiKey?: string;
  /** On a loopback host, the names besides loopback ones that requests may carry in Host (STRATA_ALLOWED_HOSTS). */
  allowedHosts?: string[];
  /** A request body silent this long (ms) is refused 408 and its connection closed (default 20 s; 0: no limit). */
  bodyIdleTimeoutMs?: number;
  /** An answer its client reads nothing of this long (ms) is cut with its connection (default 30 s; 0: never). */
  readerIdleTimeoutMs?: number;
  /** Poems being written at once, all visitors together, and for one visitor (its address); past either, 429 busy. */
  generations?: { slots: number; perVisitor: number };
  /** Peers whose X-Forwarded-For names the visitor (STRATA_TRUST_PROXY, as the gateway reads it); unset: none. */
  trustProxy?: string;
}

export interface UpstreamConfig {
  /** OpenAI-style base URL, e.g. http://127.0.0.1:8000/v1. */
  baseUrl: string;
  apiKey: string;
  model: string;
  timeoutMs: number;
  maxRetries: number;
  maxTokens: number;
  /** Unset: left out of the request, so the upstream's default applies (a model's own, where it states one). */
  temperature?: number;
}

export const DEFAULT_DATABASE_URL = 'file:./data/poems.db';
export const DEFAULT_API_BASE_URL = 'http://127.0.0.1:8000/v1';
export const DEFAULT_MODEL = 'strata-verse';

export const poemAppEnvSchema = z.object({
  PORT: env.port(3000),
  /** Interface to listen on. */
  HOST: z.string().default('0.0.0.0'),
  ...allowedHostsEnv,
  /** `production` hides error details from pages; the rest is unchanged. */
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: env.logLevel(),
  /** The poem history: `file:<path>` of an SQLite database (created when missing). */
  DATABASE_URL: z
    .string()
    .default(DEFAULT_DATABASE_URL)
    .transform((value, ctx) => {
      try {
        return parseDatabaseUrl(value);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    }),
  /** The OpenAI-compatible upstream that writes the poems (a real provider, or Strata's model server). */
  API_BASE_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as http://127.0.0.1:8000/v1' }).default(DEFAULT_API_BASE_URL),
  // The local model server needs no key; OPENAI_API_KEY is accepted as a fallback so a dummy value set for
  // other tools does no harm and a real one works unchanged.
  API_KEY: z.string().optional(),
  /** Fallback for API_KEY. */
  OPENAI_API_KEY: z.string().optional(),
  /** The upstream model that writes the poems. */
  API_MODEL: z.string().min(1).default(DEFAULT_MODEL),
  /** How long one upstream call may take, ms. */
  API_TIMEOUT_MS: env.int(30_000, 100, 600_000),
  // Retries multiply the worst-case wait; one slow upstream must not turn into a storm, so none by default.
  API_MAX_RETRIES: env.int(0, 0, 5),
  /** Most tokens a poem may have (the upstream's own limit is also respected). */
  API_MAX_TOKENS: env.int(256, 1, 4096),
  /** Sampling temperature sent upstream (unset: the upstream model's own default). */
  API_TEMPERATURE: z.coerce.number().min(0).max(2).optional(),
  /** When set, writing and deleting history needs `Authorization: Bearer <key>`. */
  POEM_APP_API_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  /** Poems being written at once, all visitors together (each holds upstream calls): shared fairly between the visitors that want them. */
  POEM_APP_GENERATIONS: env.int(32, 1, 100_000),
  /** Poems being written at once for one visitor (its address); past it, 429. */
  POEM_APP_GENERATIONS_PER_VISITOR: env.int(4, 1, 100_000),
  /** A request body that sends nothing this long, ms, is answered 408 request_timeout and its connection closed (0: no limit). */
  POEM_APP_BODY_IDLE_TIMEOUT_MS: env.int(DEFAULT_BODY_IDLE_TIMEOUT_MS, 0, 3_600_000),
  /** An answer its client reads nothing of this long, ms, is cut with its connection (0: never). */
  POEM_APP_READER_IDLE_TIMEOUT_MS: env.int(DEFAULT_READER_IDLE_TIMEOUT_MS, 0, 3_600_000),
  ...trustProxyEnv,
});

/** Read the poem app's configuration from env; throws a ConfigError naming every bad variable. */
export function loadPoemAppConfig(source: NodeJS.ProcessEnv = process.env): PoemAppConfig {
  const c = loadConfig('poem-app', poemAppEnvSchema, source);
  return {
    port: c.PORT,
    host: c.HOST,
    allowedHosts: allowedHosts(c.STRATA_ALLOWED_HOSTS),
    databasePath: c.DATABASE_URL,
    logLevel: c.LOG_LEVEL,
    production: c.NODE_ENV === 'production',
    ...(c.POEM_APP_API_KEY ? { apiKey: c.POEM_APP_API_KEY } : {}),
    generations: { slots: c.POEM_APP_GENERATIONS, perVisitor: c.POEM_APP_GENERATIONS_PER_VISITOR },
    bodyIdleTimeoutMs: c.POEM_APP_BODY_IDLE_TIMEOUT_MS,
    readerIdleTimeoutMs: c.POEM_APP_READER_IDLE_TIMEOUT_MS,
    ...(c.STRATA_TRUST_PROXY ? { trustProxy: c.STRATA_TRUST_PROXY } : {}),
    upstream: {
      baseUrl: c.API_BASE_URL,
      apiKey: c.API_KEY || c.OPENAI_API_KEY || 'not-needed',
      model: c.API_MODEL,
      timeoutMs: c.API_TIMEOUT_MS,
      maxRetries: c.API_MAX_RETRIES,
      maxTokens: c.API_MAX_TOKENS,
      ...(c.API_TEMPERATURE === undefined ? {} : { temperature: c.API_TEMPERATURE }),
    },
  };
}
