// Strata image search: wiring of config, CLIP model, index, LLM assistance, routes and the web UI.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express from 'express';
import {
  allowedHosts,
  createApp,
  createLogger,
  createRegistry,
  Gauge,
  httpMetrics,
  listen,
  type Logger,
  type Registry,
  type RunningService,
  trustedProxies,
} from '../../service-kit/src/index.js';
import { BucketSource } from './bucket-source.js';
import { ClipEncoder } from './clip/encoder.js';
import { AmqpObjectEvents, OBJECT_EVENT_TYPES, type ObjectEventSource } from './object-events.js';
import { checkModelDir, describeModel, fetchModelFromS3 } from './clip/model-files.js';
import { loadImageSearchConfig, type ImageSearchConfig } from './config.js';
import { WriteAuthorizer } from './http/auth.js';
import { errorBody, errorHandler } from './http/errors.js';
import { browserFormats, imageRenditionRoutes } from './http/image-routes.js';
import { imageReadGuard, imageSearchRoutes } from './http/routes.js';
import { ImageAccess } from './image-access.js';
import { ImageFiles } from './image-files.js';
import { ImageIndex, trainingOptions } from './index/image-index.js';
import { LlmAssistant } from './llm/assistant.js';
import { matchQuality } from './match-quality.js';
import { RenditionCache } from './renditions.js';
import { ModelUnavailableError, SearchService } from './search-service.js';

const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../web');

export type StartImageSearchOptions = Partial<ImageSearchConfig> & {
  logger?: Logger;
  registry?: Registry;
  host?: string;
  /** Environment to read the rest of the configuration from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** In-process object store events (the standalone platform's broker); else IMAGE_SEARCH_EVENTS_AMQP_URL. */
  objectEvents?: ObjectEventSource;
  /** The caller put the test encoder there and tells the user so itself (the standalone's banner): an info line, not a warning. */
  testEncoderNoted?: boolean;
  /** Slow clients: a request body silent this long (ms) is refused 408, an image its client stops reading is cut; 0: no limit (default: IMAGE_SEARCH_BODY_IDLE_TIMEOUT_MS, IMAGE_SEARCH_READER_IDLE_TIMEOUT_MS). */
  bodyIdleTimeoutMs?: number;
  readerIdleTimeoutMs?: number;
};

/** Find the model (directory or object store) and load it; null + reason when it is not available. */
async function loadModel(
  config: ImageSearchConfig,
  logger: Logger,
  testEncoderNoted = false,
): Promise<{ encoder: ClipEncoder | null; error?: string; dir?: string; description?: ReturnType<typeof describeModel> }> {
  try {
    const dir = config.IMAGE_SEARCH_MODEL_S3_URL
      ? await fetchModelFromS3(
          {
            endpoint: config.IMAGE_SEARCH_S3_ENDPOINT,
            url: config.IMAGE_SEARCH_MODEL_S3_URL,
            region: config.IMAGE_SEARCH_S3_REGION,
            accessKeyId: config.IMAGE_SEARCH_S3_ACCESS_KEY_ID,
            secretAccessKey: config.IMAGE_SEARCH_S3_SECRET_ACCESS_KEY,
          },
          config.IMAGE_SEARCH_MODEL_CACHE_DIR,
        )
      : checkModelDir(config.IMAGE_SEARCH_MODEL_DIR);
    const encoder = await ClipEncoder.load(dir, { executionProvider: config.IMAGE_SEARCH_EXECUTION_PROVIDER });
    if (encoder.providerFallback) logger.warn(encoder.providerFallback);
    const description = describeModel(dir);
    if (description.testEncoder) logger[testEncoderNoted ? 'info' : 'warn']({ dir }, `image encoder loaded: ${description.note}`);
    else logger.info({ dir, dim: encoder.dim, executionProvider: encoder.executionProvider }, 'CLIP model loaded');
    return { encoder, dir, description };
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    logger.warn({ error }, 'CLIP model not available: search and add are disabled until it is');
    return { encoder: null, error };
  }
}

export async function startImageSearch(opts: StartImageSearchOptions = {}): Promise<RunningService> {
  const {
    logger: givenLogger,
    registry: givenRegistry,
    host,
    env,
    objectEvents: givenEvents,
    testEncoderNoted,
    bodyIdleTimeoutMs,
    readerIdleTimeoutMs,
    ...overrides
  } = opts;
  const config: ImageSearchConfig = { ...loadImageSearchConfig(env ?? process.env), ...overrides };
  const logger = givenLogger ?? createLogger('image-search', config.LOG_LEVEL);
  const registry = givenRegistry ?? createRegistry('image-search');

  const model = await loadModel(config, logger, testEncoderNoted);
  if (model.encoder && model.encoder.dim !== 512) logger.warn({ dim: model.encoder.dim }, 'CLIP model is not 512-d');
  const index = await ImageIndex.open({
    dir: config.IMAGE_SEARCH_INDEX_DIR,
    dim: model.encoder?.dim ?? 512,
    indexString: config.IMAGE_SEARCH_INDEX_STRING,
    nprobe: config.IMAGE_SEARCH_NPROBE,
    bufferThreshold: config.IMAGE_SEARCH_BUFFER_THRESHOLD,
    rerank: config.IMAGE_SEARCH_RERANK,
    rerankFactor: config.IMAGE_SEARCH_RERANK_FACTOR,
    training: trainingOptions(config),
    logger,
  });
  const files = new ImageFiles(config.IMAGE_FILE_DIR);
  const renditions = new RenditionCache({
    dir: config.IMAGE_SEARCH_THUMBNAIL_DIR ?? path.join(config.IMAGE_SEARCH_INDEX_DIR, 'thumbnails'),
    maxBytes: config.IMAGE_SEARCH_THUMBNAIL_CACHE_MB * 2 ** 20,
    logger,
  });
  const service = new SearchService({
    index,
    files,
    embedder: model.encoder,
    modelError: model.error,
    defaultTopk: Math.min(config.IMAGE_SEARCH_TOPK, config.IMAGE_SEARCH_MAX_TOPK),
    maxTopk: config.IMAGE_SEARCH_MAX_TOPK,
  });
  let subscription: { close(): Promise<void> } | undefined;
  const source = config.IMAGE_SEARCH_SOURCE_S3_URL
    ? new BucketSource({
        location: {
          endpoint: config.IMAGE_SEARCH_S3_ENDPOINT,
          url: config.IMAGE_SEARCH_SOURCE_S3_URL,
          region: config.IMAGE_SEARCH_S3_REGION,
          accessKeyId: config.IMAGE_SEARCH_S3_ACCESS_KEY_ID,
          secretAccessKey: config.IMAGE_SEARCH_S3_SECRET_ACCESS_KEY,
        },
        files,
        service,
        logger,
        aclRefreshSeconds: config.IMAGE_SEARCH_ACL_REFRESH_S,
        requestIdleMs: config.IMAGE_SEARCH_S3_IDLE_TIMEOUT_MS,
      })
    : null;
  // An image an admin removes stays out of the index until its object changes.
  if (source) service.onRemoved((paths) => source.exclude(paths));
  const llm = config.LLM_BASE_URL
    ? new LlmAssistant({
        baseURL: config.LLM_BASE_URL,
        apiKey: config.LLM_API_KEY,
        model: config.LLM_MODEL,
        timeoutSeconds: config.LLM_TIMEOUT_SECONDS,
        maxRetries: config.LLM_MAX_RETRIES,
        encoder: model.description ?? null,
        logger,
      })
    : null;

  new Gauge({
    name: 'image_search_index_vectors',
    help: 'Vectors in the image index, by part (main, buffer, deleted)',
    labelNames: ['part'] as const,
    registers: [registry],
    collect() {
      const s = index.status();
      this.set({ part: 'main' }, s.main.vectors);
      this.set({ part: 'buffer' }, s.buffer.vectors);
      this.set({ part: 'deleted' }, s.deleted);
    },
  });

  const serviceOptions = {
    name: 'image-search',
    logger,
    registry,
    readiness: {
      'clip-model': () => {
        if (!service.modelLoaded) throw new ModelUnavailableError();
      },
    },
    onClose: [async () => subscription?.close(), async () => source?.stop(), () => index.close(), () => model.encoder?.close()],
  };
  const auth = new WriteAuthorizer({ apiKey: config.IMAGE_SEARCH_API_KEY, jwtSecret: config.STRATA_JWT_SECRET, adminUsers: config.IMAGE_SEARCH_ADMIN_USERS });
  if (!auth.describe().accepts.length) logger.warn('neither IMAGE_SEARCH_API_KEY nor STRATA_JWT_SECRET is set: the index cannot be changed over HTTP');
  const access = new ImageAccess({
    publicSources: config.IMAGE_SEARCH_PUBLIC_SOURCES,
    ownerOf: (bucket) => source?.ownerOf(bucket),
    objectOf: (relative) => source?.objectOf(relative),
    // Replicas that share a secret accept each other's image URLs.
    signingSecret: config.IMAGE_SEARCH_API_KEY ?? config.STRATA_JWT_SECRET,
  });
  const app = createApp(serviceOptions);
  app.use(httpMetrics(registry).middleware);
  app.use('/static', express.static(WEB_DIR, { index: false, fallthrough: false }));
  app.get('/favicon.ico', (_req: express.Request, res: express.Response) => res.sendFile(path.join(WEB_DIR, 'favicon.ico'), { maxAge: '1d' }));
  // Images are served read-only from the image directory, to callers who may read them; `send` refuses paths leaving it.
  app.use('/images', imageReadGuard(files, auth, access));
  app.use('/images', browserFormats(files, renditions));
  app.use('/images', express.static(files.root, { index: false, dotfiles: 'deny', fallthrough: false }));
  app.use(imageRenditionRoutes({ service, files, auth, access, cache: renditions }));
  app.use(
    imageSearchRoutes({
      service,
      llm,
      webIndexFile: path.join(WEB_DIR, 'index.html'),
      maxUploadBytes: config.IMAGE_SEARCH_MAX_UPLOAD_BYTES,
      querySlots: { slots: config.IMAGE_SEARCH_QUERY_SLOTS, perCaller: config.IMAGE_SEARCH_QUERY_SLOTS_PER_CALLER },
      clientAddress: trustedProxies(config.STRATA_TRUST_PROXY).clientAddress,
      auth,
      access,
      matchQuality: (results) => matchQuality(results, model.description?.backbone ?? 'ViT-B/32'),
      sourceStatus: () => (source ? source.status() : { kind: 'directory', path: files.root }),
      // Server paths, the model's error (it names them) and the source's object keys: admins only.
      describe: (admin) => {
        const status = index.status();
        return {
          service: 'image-search',
          ready: service.modelLoaded,
          model: {
            loaded: service.modelLoaded,
            dir: admin ? (model.dir ?? null) : null,
            error: service.modelError ? (admin ? service.modelError : new ModelUnavailableError().message) : null,
            backbone: model.description?.backbone ?? null,
            testEncoder: model.description?.testEncoder ?? false,
            ...(model.description?.note ? { note: model.description.note } : {}),
            executionProvider: model.encoder?.executionProvider ?? null,
            ...(model.encoder?.providerFallback ? { executionProviderNote: model.encoder.providerFallback } : {}),
          },
          // Gateway tokens come from POST /login at the S3 endpoint (Strata's gateway): the page tells users where.
          auth: { ...auth.describe(), ...(config.STRATA_JWT_SECRET ? { loginUrl: `${config.IMAGE_SEARCH_S3_ENDPOINT.replace(/\/$/, '')}/login` } : {}) },
          llm: llm ? { enabled: true, ...llm.status(), baseUrl: config.LLM_BASE_URL } : { enabled: false, reason: 'LLM_BASE_URL is not set' },
          features: {
            textSearch: service.modelLoaded,
            imageSearch: service.modelLoaded,
            queryExpansion: Boolean(llm),
            aiExplanation: Boolean(llm),
            ragQa: Boolean(llm),
            chat: Boolean(llm),
            tools: true,
          },
          index: {
            totalVectors: status.totalVectors,
            main: status.main,
            buffer: status.buffer,
            deleted: status.deleted,
            training: status.training,
            job: status.job,
            engine: status.engine,
          },
          ...(admin
            ? { imageDir: files.root, source: source ? source.status() : { kind: 'directory', path: files.root } }
            : { source: { kind: source ? 'bucket' : 'directory' } }),
          defaults: {
            topk: config.IMAGE_SEARCH_TOPK,
            maxTopk: config.IMAGE_SEARCH_MAX_TOPK,
            nprobe: config.IMAGE_SEARCH_NPROBE,
            indexString: config.IMAGE_SEARCH_INDEX_STRING,
          },
        };
      },
    }),
  );
  app.use((_req: express.Request, res: express.Response) => res.status(404).json(errorBody(404, 'no such endpoint')));
  app.use(errorHandler(logger));

  // Which model, and whether the LLM answers at all: the status says so from the start.
  void llm?.check();
  if (config.IMAGE_SEARCH_SCAN_ON_START && service.modelLoaded) {
    void service
      .indexDirectory((done, total) => logger.info({ done, total }, 'indexing image directory'))
      .then((added) => logger.info({ added }, 'image directory indexed'))
      .catch((err: unknown) => logger.error({ err }, 'indexing the image directory failed'));
  }
  if (source) {
    if (service.modelLoaded) source.start(config.IMAGE_SEARCH_SOURCE_SYNC_SECONDS);
    else logger.warn('image bucket not synced: the CLIP model is missing');
  }
  const events =
    givenEvents ??
    (config.IMAGE_SEARCH_EVENTS_AMQP_URL
      ? new AmqpObjectEvents(config.IMAGE_SEARCH_EVENTS_AMQP_URL, { exchange: config.IMAGE_SEARCH_EVENTS_EXCHANGE, logger })
      : null);
  if (source && events && service.modelLoaded) {
    subscription = await events.subscribe(config.IMAGE_SEARCH_EVENTS_QUEUE, async (event) => {
      if (OBJECT_EVENT_TYPES.includes(event.type)) source.onObjectEvent(event.payload.bucket, event.payload.key);
    });
    source.events = 'subscribed';
  }
  // DNS-rebinding protection on loopback (service kit): STRATA_ALLOWED_HOSTS names more hosts.
  return listen(app, {
    ...serviceOptions,
    port: config.PORT,
    host: host ?? config.IMAGE_SEARCH_HOST,
    hostCheck: { allowedHosts: allowedHosts((env ?? process.env).STRATA_ALLOWED_HOSTS) },
    slowClients: {
      bodyIdleMs: bodyIdleTimeoutMs ?? config.IMAGE_SEARCH_BODY_IDLE_TIMEOUT_MS,
      readerIdleMs: readerIdleTimeoutMs ?? config.IMAGE_SEARCH_READER_IDLE_TIMEOUT_MS,
    },
  });
}
