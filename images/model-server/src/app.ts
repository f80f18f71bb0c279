import { fileURLToPath } from 'node:url';
import express, { type NextFunction, type Request, type Response } from 'express';
// The kit's modules one by one, not its index: the index also loads the SQL, Redis and AMQP clients,
// which this process never uses (tens of MB of resident memory).
import { createLogger, type Logger } from '../../service-kit/src/logger.js';
import { createRegistry, httpMetrics, type Registry } from '../../service-kit/src/metrics.js';
import { createApp, listen, type RunningService } from '../../service-kit/src/service.js';
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
  app.use(httpMetrics(registry).middleware);

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
  app.post(
    '/v1/chat/completions',
    // Any content type is read as JSON (curl's default form type included), as OpenAI's API does.
    express.json({ limit: opts.maxBodyBytes ?? 1024 * 1024, type: () => true, strict: false }),
    chatCompletionsHandler({ modelNames, scheduler: () => (engine?.ready() ? engine.queue : undefined), metrics, logger, truncatePrompt: opts.truncatePrompt }),
  );
  app.use('/v1', (req, res) => {
    sendOpenAIError(res, new OpenAIError(404, `Unknown request URL: ${req.method} ${req.originalUrl}.`, 'invalid_request_error', null, 'unknown_url'));
  });
  app.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') {
      sendOpenAIError(res, new OpenAIError(413, `The request body is larger than ${opts.maxBodyBytes ?? 1024 * 1024} bytes.`, 'invalid_request_error', null, 'request_too_large'));
    } else if (type === 'entity.parse.failed' || type === 'encoding.unsupported' || type === 'charset.unsupported') {
      sendOpenAIError(res, OpenAIError.invalid('We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.', null, 'invalid_json'));
    } else {
      logger.error({ err }, 'unhandled error');
      sendOpenAIError(res, new OpenAIError(500, 'The server had an error while processing your request.', 'server_error'));
    }
  });

  const service = await listen(app, {
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
