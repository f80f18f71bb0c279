import type http from 'node:http';
import { fileURLToPath } from 'node:url';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
// The kit's modules one by one, not its index: the index also loads the SQL, Redis and AMQP clients,
// which this process never uses (tens of MB of resident memory).
import { createLogger, type Logger } from '../../service-kit/src/logger.js';
import { createRegistry, httpMetrics, type Registry } from '../../service-kit/src/metrics.js';
import { createApp, listen, type RunningService } from '../../service-kit/src/service.js';
import { adoptRequest } from '../../service-kit/src/fast-path.js';
import { chatCompletionsHandler } from './chat-completions.js';
import { GenerationScheduler, type SequenceQueue } from './generation-scheduler.js';
import { ModelServerMetrics } from './metrics.js';
import { OnnxTransformer } from './onnx-transformer.js';
import { OpenAIError, sendOpenAIError } from './openai-errors.js';
import { WorkerEngine } from './worker-engine.js';

/** The trained model committed with the image. */
export const DEFAULT_MODEL_DIR = fileURLToPath(new URL('../model', import.meta.url));
export const DEFAULT_MODEL_NAMES = ['strata-tiny'];

export interface ModelServerOptions {
  /** 0 picks a free port. Default 8000. */
  port?: number;
  /** Default 0.0.0.0. */
  host?: string;
  /** Folder with encoder.onnx and decoder.onnx. Default: the committed model. */
  modelDir?: string;
  logger?: Logger;
  registry?: Registry;
  /** Model names this server answers to (all served by the same weights). */
  modelNames?: string[];
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
  /** Largest accepted request body. Default 1 MiB. */
  maxBodyBytes?: number;
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
  const modelNames = new Set(opts.modelNames?.length ? opts.modelNames : DEFAULT_MODEL_NAMES);
  const modelDir = opts.modelDir ?? DEFAULT_MODEL_DIR;
  let engine: Engine | undefined;

  const app = createApp({
    name: SERVICE,
    logger,
    registry,
    readiness: {
      model: () => {
        if (!engine) throw new Error('model not loaded');
        if (!engine.ready()) throw new Error('generation worker restarting');
      },
    },
  });
  const { middleware: metricsMiddleware } = httpMetrics(registry);
  app.use(metricsMiddleware);

  const startedAt = Math.floor(Date.now() / 1000);
  const modelObject = (id: string) => ({ id, object: 'model', created: startedAt, owned_by: 'strata' });
  app.get('/v1/models', (_req, res) => {
    res.json({ object: 'list', data: [...modelNames].map(modelObject) });
  });
  app.get('/v1/models/:model', (req, res) => {
    const id = String(req.params.model);
    if (modelNames.has(id)) res.json(modelObject(id));
    else sendOpenAIError(res, new OpenAIError(404, `The model '${id}' does not exist`, 'invalid_request_error', 'model', 'model_not_found'));
  });
  const maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;
  const chatCompletions = chatCompletionsHandler({ modelNames, scheduler: () => (engine?.ready() ? engine.queue : undefined), metrics, logger, truncatePrompt: opts.truncatePrompt });
  app.post(
    CHAT_COMPLETIONS,
    // Any content type is read as JSON (curl's default form type included), as OpenAI's API does.
    express.json({ limit: maxBodyBytes, type: () => true, strict: false }),
    chatCompletions,
  );
  app.use('/v1', (req, res) => {
    sendOpenAIError(res, new OpenAIError(404, `Unknown request URL: ${req.method} ${req.originalUrl}.`, 'invalid_request_error', null, 'unknown_url'));
  });
  const answerError = (err: unknown, res: Response) => {
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') {
      sendOpenAIError(res, new OpenAIError(413, `The request body is larger than ${opts.maxBodyBytes ?? 1024 * 1024} bytes.`, 'invalid_request_error', null, 'request_too_large'));
    } else if (type === 'entity.parse.failed' || type === 'encoding.unsupported' || type === 'charset.unsupported') {
      sendOpenAIError(res, OpenAIError.invalid('We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.', null, 'invalid_json'));
    } else {
      logger.error({ err }, 'unhandled error');
      sendOpenAIError(res, new OpenAIError(500, 'The server had an error while processing your request.', 'server_error'));
    }
  };
  app.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    answerError(err, res);
  });

  const service = await listen(chatCompletionsFastPath(app, { maxBodyBytes, handler: chatCompletions, metricsMiddleware, answerError }), {
    name: SERVICE,
    logger,
    registry,
    port: opts.port ?? 8000,
    host: opts.host,
    onClose: [() => engine?.close()],
  });
  try {
    const started = performance.now();
    const schedulerOptions = {
      maxBatch: opts.batching === false ? 1 : (opts.maxBatch ?? 32),
      batchWindowMs: opts.batchWindowMs ?? 3,
      admissionWave: opts.admissionWave,
      maxQueue: opts.maxQueue ?? 256,
    };
    if (opts.worker !== false) {
      const worker = await WorkerEngine.start({
        ...schedulerOptions, modelDir, threads: opts.threads, executionProvider: opts.executionProvider, logger, observer: metrics,
      });
      engine = { queue: worker, ready: () => worker.ready, close: () => worker.close() };
    } else {
      const model = await OnnxTransformer.loadWithFallback(modelDir, { threads: opts.threads, executionProvider: opts.executionProvider }, (err) => {
        logger.warn({ err }, 'CUDA execution provider unavailable, using the CPU');
      });
      const scheduler = new GenerationScheduler(model, schedulerOptions, metrics);
      engine = {
        queue: scheduler,
        ready: () => true,
        close: async () => {
          scheduler.close();
          await model.release();
        },
      };
    }
    logger.info({ modelDir, models: [...modelNames], loadMs: Math.round(performance.now() - started), batching: opts.batching !== false, worker: opts.worker !== false }, 'model loaded');
  } catch (err) {
    await service.stop(0);
    throw err;
  }
  return service;
}

const CHAT_COMPLETIONS = '/v1/chat/completions';
/** What Express's router would set as req.route for the chat route (the http metrics' route label). */
const CHAT_ROUTE = { path: CHAT_COMPLETIONS };

/**
 * POST /v1/chat/completions without Express's router and body parser, for the usual request: a body
 * with a Content-Length within the limit, no Content-Encoding, UTF-8 (or no charset). It runs the
 * same handler, on the same Express request/response objects, with the same http metrics and the same
 * answers to an unparsable body or a handler failure; any other request (other routes, a chunked,
 * compressed, non-UTF-8 or too large body…) goes through Express as before. Under load the router's
 * walk past the other routes and the body parser's stream machinery were a noticeable part of the
 * HTTP thread's time per request, which is on the path between one answer and the next request.
 */
function chatCompletionsFastPath(
  app: Express,
  opts: {
    maxBodyBytes: number;
    handler: (req: Request, res: Response) => Promise<void>;
    metricsMiddleware: (req: Request, res: Response, next: NextFunction) => void;
    answerError: (err: unknown, res: Response) => void;
  },
): http.RequestListener & { locals: Express['locals']; app: Express } {
  const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const headers = req.headers;
    const length = Number(headers['content-length']);
    if (
      req.method !== 'POST' || req.url !== CHAT_COMPLETIONS || !(length > 0) || length > opts.maxBodyBytes ||
      headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined || !utf8(headers['content-type'])
    ) {
      app(req, res);
      return;
    }
    // What Express does to every request before its router (app.handle), then what its router sets.
    const { request, response } = adoptRequest(app, req, res);
    (request as Request & { route: unknown }).route = CHAT_ROUTE;
    opts.metricsMiddleware(request, response, () => {});
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8');
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a byte order mark, as the body parser drops it
      try {
        request.body = JSON.parse(text);
      } catch (err) {
        opts.answerError(Object.assign(err as Error, { type: 'entity.parse.failed' }), response);
        return;
      }
      opts.handler(request, response).catch((err: unknown) => {
        if (!res.headersSent) opts.answerError(err, response);
        else res.destroy();
      });
    });
  };
  return Object.assign(listener, { locals: app.locals, app });
}

/** No charset, or UTF-8: the bodies the fast path decodes itself. */
function utf8(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType);
  return !charset || /^utf-?8$/i.test(charset[1]!);
}
