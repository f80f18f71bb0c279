import { timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
// The kit's modules one by one, not its index: the index also loads the SQL, Redis and AMQP clients,
// which this process never uses (tens of MB of resident memory).
import { createLogger, type Logger } from '../../service-kit/src/logger.js';
import { createRegistry, httpMetrics, type HttpMetrics, type Registry } from '../../service-kit/src/metrics.js';
import { FairPool } from '../../service-kit/src/fair-pool.js';
import { trustedProxies, type TrustedProxies } from '../../service-kit/src/trusted-proxies.js';
import { createApp, listen, type RunningService } from '../../service-kit/src/service.js';
import { chatCompletionsHandler, type ServedModel } from './chat-completions.js';
import { GenerationScheduler, type SchedulerObserver, type SequenceQueue } from './generation-scheduler.js';
import { ModelServerMetrics } from './metrics.js';
import { OnnxTransformer } from './onnx-transformer.js';
import { OpenAIError, sendOpenAIError } from './openai-errors.js';
import { configuredModelSources, DEFAULT_MODEL_DIR, loadSamplingDefaults, loadTokenizer, modelObject, type ModelSource } from './served-models.js';
import { WorkerEngine } from './worker-engine.js';

export { DEFAULT_MODEL_DIR };

export interface ModelServerOptions {
  /** 0 picks a free port. Default 8000. */
  port?: number;
  /** Default 0.0.0.0. */
  host?: string;
  /**
   * The models served, each its own weights and engine, listed by /v1/models in this order. Default:
   * the built-in strata-verse and strata-tiny, unless modelDir or modelNames is given (configuredModelSources).
   */
  models?: ModelSource[];
  /** One model: the folder with encoder.onnx and decoder.onnx (and tokenizer.json for a text model). */
  modelDir?: string;
  logger?: Logger;
  registry?: Registry;
  /** Without modelDir: built-in model names, each served by its own weights; with it: the names of its weights (default: the built-in's, else the path). */
  modelNames?: string[];
  /** On a loopback host, the names besides loopback ones that requests may carry in Host (STRATA_ALLOWED_HOSTS). */
  allowedHosts?: string[];
  /** Bearer keys that /v1 requests must carry (any one of them); none: no key needed (as vLLM's --api-key). */
  apiKeys?: string[];
  /** Dynamic batching on (default) or off (one sequence at a time). */
  batching?: boolean;
  /** Most sequences decoded together when batching. Default 32. */
  maxBatch?: number;
  /** How long an idle server waits for more requests before the first step. Default 3 ms. */
  batchWindowMs?: number;
  /** While a batch decodes, prompts are encoded in waves of at least this many, even with fewer rows free (one step's wait at most). Default 8. */
  admissionWave?: number;
  /** Most sequences waiting for a slot before requests get 429. Default 256. */
  maxQueue?: number;
  /**
   * Most sequences (waiting and decoding) of one model that one caller (an API key; without keys, a
   * client address, X-Forwarded-For's from a peer `trustProxy` names) may hold. Default: half of maxQueue + maxBatch, so a caller that floods the server
   * leaves the other half to the rest; callers also get no more than their share while others want some.
   */
  maxQueuePerCaller?: number;
  /** Peers whose X-Forwarded-For names the client, for callers without keys (STRATA_TRUST_PROXY: an ingress); unset: none. */
  trustProxy?: string;
  /** Largest accepted request body. Default 1 MiB. */
  maxBodyBytes?: number;
  /** A request body silent this long (ms) is refused 408 and its connection closed (default 20 s; 0: no limit). */
  bodyIdleTimeoutMs?: number;
  /** An answer its client reads nothing of this long (ms) is cut with its connection (default 30 s; 0: never). */
  readerIdleTimeoutMs?: number;
  /** ONNX Runtime intra-op threads (default 1); 0 = runtime default. */
  threads?: number;
  /** 'cuda' asks ONNX Runtime for the CUDA provider (falls back to the CPU when it cannot load). */
  executionProvider?: 'cpu' | 'cuda';
  /** Keep the tail of prompts longer than the context instead of answering 400 (default false). */
  truncatePrompt?: boolean;
  /**
   * Run the generation engine (ONNX sessions and decode loop) in a worker thread (default true), so
   * that decoding and HTTP handling do not share one event loop; false runs it on the main thread.
   */
  worker?: boolean;
}

/** The generation engine as the server uses it, in a worker thread or in this one. */
interface Engine {
  queue: SequenceQueue;
  ready(): boolean;
  close(): Promise<void>;
}

const SERVICE = 'model-server';

/** Load the model and serve the OpenAI-compatible API; resolves once the model is loaded and the port is open. */
export async function startModelServer(opts: ModelServerOptions = {}): Promise<RunningService> {
  const logger = opts.logger ?? createLogger(SERVICE);
  const registry = opts.registry ?? createRegistry(SERVICE);
  const metrics = new ModelServerMetrics(registry);
  const sources = opts.models ?? configuredModelSources(opts.modelDir, opts.modelNames);
  const names = sources.flatMap((m) => m.names);
  if (new Set(names).size !== names.length) throw new Error(`model names must be unique, got ${names.join(', ')}`);
  const tokenizers = await Promise.all(sources.map((m) => loadTokenizer(m.dir)));
  const sampling = await Promise.all(sources.map((m) => loadSamplingDefaults(m.dir)));
  /** Per source, once loaded. */
  const engines: Array<Engine | undefined> = sources.map(() => undefined);
  const models = new Map<string, ServedModel>();
  const schedulerOptions = {
    maxBatch: opts.batching === false ? 1 : (opts.maxBatch ?? 32),
    batchWindowMs: opts.batchWindowMs ?? 3,
    admissionWave: opts.admissionWave,
    maxQueue: opts.maxQueue ?? 256,
  };
  // Every sequence an engine holds, waiting or decoding.
  const capacity = schedulerOptions.maxQueue + schedulerOptions.maxBatch;
  sources.forEach((source, i) => {
    const served: ServedModel = {
      tokenizer: tokenizers[i]!,
      sampling: sampling[i]!,
      scheduler: () => (engines[i]?.ready() ? engines[i].queue : undefined),
      shares: new FairPool(capacity, opts.maxQueuePerCaller ?? Math.ceil(capacity / 2)),
    };
    for (const name of source.names) models.set(name, served);
  });

  const app = createApp({
    name: SERVICE,
    logger,
    registry,
    readiness: {
      model: () => {
        if (engines.some((e) => !e)) throw new Error('model not loaded');
        if (engines.some((e) => !e!.ready())) throw new Error('generation worker restarting');
      },
    },
  });
  const httpCounts = httpMetrics(registry);
  app.use(httpCounts.middleware);
  const keyOf = apiKeyCheck(opts.apiKeys);
  const authorized = (header: string | undefined) => keyOf(header) !== undefined;
  // As vLLM's --api-key: the API needs a key; health, readiness and metrics stay open.
  app.use('/v1', (req, res, next) => {
    if (authorized(req.headers.authorization)) next();
    else {
      res.setHeader('WWW-Authenticate', 'Bearer');
      sendOpenAIError(
        res,
        new OpenAIError(
          401,
          'Incorrect or missing API key: send the header Authorization: Bearer <key> with one of the keys in MODEL_SERVER_API_KEYS.',
          'invalid_request_error',
          null,
          'invalid_api_key',
        ),
      );
    }
  });

  const startedAt = Math.floor(Date.now() / 1000);
  app.get('/v1/models', (_req, res) => {
    res.json({ object: 'list', data: names.map((id) => modelObject(id, startedAt)) });
  });
  app.get('/v1/models/:model', (req, res) => {
    const id = String(req.params.model);
    if (models.has(id)) res.json(modelObject(id, startedAt));
    else sendOpenAIError(res, new OpenAIError(404, `The model '${id}' does not exist`, 'invalid_request_error', 'model', 'model_not_found'));
  });
  const maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;
  const callerOf = requestCaller(keyOf, trustedProxies(opts.trustProxy));
  const chatCompletions = chatCompletionsHandler({ models, metrics, logger, truncatePrompt: opts.truncatePrompt, callerOf });
  app.post(
    CHAT_COMPLETIONS,
    // Any content type is read as JSON (curl's default form type included), as OpenAI's API does.
    express.json({ limit: maxBodyBytes, type: () => true, strict: false }),
    chatCompletions,
  );
  app.use('/v1', (req, res) => {
    sendOpenAIError(res, new OpenAIError(404, `Unknown request URL: ${req.method} ${req.originalUrl}.`, 'invalid_request_error', null, 'unknown_url'));
  });
  // Every other route answers JSON in the same shape (never Express's HTML page).
  app.use((req, res) => {
    sendOpenAIError(
      res,
      new OpenAIError(404, `Unknown request URL: ${req.method} ${req.originalUrl}. The API is under /v1.`, 'invalid_request_error', null, 'unknown_url'),
    );
  });
  const answerError = (err: unknown, res: http.ServerResponse) => {
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') {
      sendOpenAIError(
        res,
        new OpenAIError(413, `The request body is larger than ${opts.maxBodyBytes ?? 1024 * 1024} bytes.`, 'invalid_request_error', null, 'request_too_large'),
      );
    } else if (type === 'entity.parse.failed' || type === 'encoding.unsupported' || type === 'charset.unsupported') {
      sendOpenAIError(
        res,
        OpenAIError.invalid('We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.', null, 'invalid_json'),
      );
    } else {
      logger.error({ err }, 'unhandled error');
      sendOpenAIError(res, new OpenAIError(500, 'The server had an error while processing your request.', 'server_error'));
    }
  };
  app.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    answerError(err, res);
  });

  const service = await listen(chatCompletionsFastPath(app, { maxBodyBytes, handler: chatCompletions, httpCounts, answerError, authorized }), {
    name: SERVICE,
    logger,
    registry,
    port: opts.port ?? 8000,
    host: opts.host,
    hostCheck: {
      allowedHosts: opts.allowedHosts,
      refuse: (res, status, message) => sendOpenAIError(res, new OpenAIError(status, message, 'permission_error', null, 'forbidden_host')),
    },
    slowClients: {
      bodyIdleMs: opts.bodyIdleTimeoutMs,
      readerIdleMs: opts.readerIdleTimeoutMs,
      refuseSlowBody: (_req, res) =>
        sendOpenAIError(
          res,
          new OpenAIError(408, 'The request body stopped arriving; send it whole and promptly.', 'invalid_request_error', null, 'request_timeout'),
        ),
    },
    onClose: [
      async () => {
        await Promise.all(engines.map((e) => e?.close()));
      },
    ],
  });
  try {
    const started = performance.now();
    const observers = summingObservers(metrics, sources.length);
    await Promise.all(
      sources.map(async (source, i) => {
        engines[i] = await startEngine(source.dir, schedulerOptions, opts, logger, observers[i]!);
      }),
    );
    logger.info(
      { models: sources, loadMs: Math.round(performance.now() - started), batching: opts.batching !== false, worker: opts.worker !== false },
      'models loaded',
    );
  } catch (err) {
    await service.stop(0);
    throw err;
  }
  return service;
}

/** One model's generation engine: in a worker thread (default) or on this thread. */
async function startEngine(
  modelDir: string,
  schedulerOptions: { maxBatch: number; batchWindowMs: number; admissionWave?: number; maxQueue: number },
  opts: ModelServerOptions,
  logger: Logger,
  observer: SchedulerObserver,
): Promise<Engine> {
  if (opts.worker !== false) {
    const worker = await WorkerEngine.start({
      ...schedulerOptions,
      modelDir,
      threads: opts.threads,
      executionProvider: opts.executionProvider,
      logger,
      observer,
    });
    return { queue: worker, ready: () => worker.ready, close: () => worker.close() };
  }
  const model = await OnnxTransformer.loadWithFallback(modelDir, { threads: opts.threads, executionProvider: opts.executionProvider }, (err) => {
    logger.warn({ err }, 'CUDA execution provider unavailable, using the CPU');
  });
  const scheduler = new GenerationScheduler(model, schedulerOptions, observer);
  return {
    queue: scheduler,
    ready: () => true,
    close: async () => {
      scheduler.close();
      await model.release();
    },
  };
}

/** One observer per engine, all feeding one set of metrics: the queue gauges show their sums. */
function summingObservers(metrics: ModelServerMetrics, count: number): SchedulerObserver[] {
  if (count === 1) return [metrics];
  const queues = Array.from({ length: count }, () => ({ waiting: 0, active: 0 }));
  return queues.map((queue) => ({
    queueChanged: (waiting: number, active: number) => {
      queue.waiting = waiting;
      queue.active = active;
      metrics.queueChanged(
        queues.reduce((n, q) => n + q.waiting, 0),
        queues.reduce((n, q) => n + q.active, 0),
      );
    },
    stepped: (batchSize: number, seconds: number) => metrics.stepped(batchSize, seconds),
    firstToken: (seconds: number) => metrics.firstToken(seconds),
    nextToken: (seconds: number) => metrics.nextToken(seconds),
  }));
}

/**
 * Who is asking, for the shares of the engine: its API key (by its place in the list, never the key itself);
 * without keys, its address (behind a trusted ingress, the client's, not the ingress's: else every caller is one).
 */
export function requestCaller(keyOf: (header: string | undefined) => string | undefined, proxies: TrustedProxies) {
  return (req: http.IncomingMessage): string => keyOf(req.headers.authorization) || `address:${proxies.clientAddress(req)}`;
}

/**
 * Which of the keys an Authorization header carries: `key-<n>`, its place in the list; undefined when
 * none; '' (any caller) when there are no keys.
 */
function apiKeyCheck(keys: readonly string[] | undefined): (header: string | undefined) => string | undefined {
  const wanted = (keys ?? []).filter(Boolean).map((k) => Buffer.from(k));
  if (wanted.length === 0) return () => '';
  return (header) => {
    const match = header === undefined ? null : /^Bearer\s+(.+)$/i.exec(header);
    if (!match) return undefined;
    const given = Buffer.from(match[1]!.trim());
    const i = wanted.findIndex((key) => key.length === given.length && timingSafeEqual(key, given));
    return i < 0 ? undefined : `key-${i}`;
  };
}

const CHAT_COMPLETIONS = '/v1/chat/completions';
/**
 * POST /v1/chat/completions without Express's router and body parser, for the usual request: a body
 * with a Content-Length within the limit, no Content-Encoding, UTF-8 (or no charset). It runs the
 * same handler, on Node's own request and response, with the same http metrics (route label) and the same
 * answers to an unparsable body or a handler failure; any other request (other routes, a chunked,
 * compressed, non-UTF-8 or too large body…) goes through Express as before. Under load the router's
 * walk past the other routes and the body parser's stream machinery were a noticeable part of the
 * HTTP thread's time per request, which is on the path between one answer and the next request.
 */
function chatCompletionsFastPath(
  app: Express,
  opts: {
    maxBodyBytes: number;
    handler: (req: http.IncomingMessage & { body?: unknown }, res: http.ServerResponse) => Promise<void>;
    httpCounts: HttpMetrics;
    answerError: (err: unknown, res: http.ServerResponse) => void;
    authorized: (header: string | undefined) => boolean;
  },
): http.RequestListener & { locals: Express['locals'] } {
  const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const headers = req.headers;
    const length = Number(headers['content-length']);
    if (
      req.method !== 'POST' ||
      req.url !== CHAT_COMPLETIONS ||
      !(length > 0) ||
      length > opts.maxBodyBytes ||
      headers['transfer-encoding'] !== undefined ||
      headers['content-encoding'] !== undefined ||
      !utf8(headers['content-type']) ||
      !opts.authorized(headers.authorization)
    ) {
      app(req, res);
      return;
    }
    opts.httpCounts.observe(req, res, CHAT_COMPLETIONS);
    const request: http.IncomingMessage & { body?: unknown } = req;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8');
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a byte order mark, as the body parser drops it
      try {
        request.body = JSON.parse(text);
      } catch (err) {
        opts.answerError(Object.assign(err as Error, { type: 'entity.parse.failed' }), res);
        return;
      }
      opts.handler(request, res).catch((err: unknown) => {
        if (!res.headersSent) opts.answerError(err, res);
        else res.destroy();
      });
    });
  };
  return Object.assign(listener, { locals: app.locals });
}

/** No charset, or UTF-8: the bodies the fast path decodes itself. */
function utf8(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType);
  return !charset || /^utf-?8$/i.test(charset[1]!);
}
