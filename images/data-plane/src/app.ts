import type http from 'node:http';
import {
  amqpConnectionMetrics,
  cacheMetrics,
  countedCache,
  createApp,
  createLogger,
  createProductionCache,
  createProductionSql,
  createRegistry,
  httpMetrics,
  InMemoryCache,
  listen,
  SecretBox,
  type Logger,
  type ProductionSettings,
  type Registry,
  type RunningService,
  runChain,
  type SqlClient,
} from '../../service-kit/src/index.js';
import { internalErrorHandler, internalSlowClients, requireInternalToken } from '../../object-model/src/index.js';
import { FsBackend, SMALL_READ } from './backends/fs-backend.js';
import { backendsConfigFromEnv, type BackendsConfig } from './backends/config.js';
import { keyStoresFrom, type EncryptionKeySettings, type KeyStore } from './encryption/key-store.js';
import { ObjectEncryption } from './encryption/object-encryption.js';
import { BackendRegistry } from './backends/registry.js';
import { backendRoutes } from './backends/routes.js';
import { SmallBlobCache } from './backends/small-blob-cache.js';
import type { Cache } from './cache/cache.js';
import { Catalog } from './catalog/catalog.js';
import { AmqpEventPublisher } from './events/amqp-publisher.js';
import type { EventPublisher } from './events/publisher.js';
import { BlobCollector } from './gc/blob-collector.js';
import { CleanupJob } from './gc/cleanup-job.js';
import { dataPlaneErrors } from './http/errors.js';
import { dataPlaneRoutes, OBJECT_ROUTE, objectRoute } from './http/routes.js';
import { dataPlaneMetrics } from './metrics.js';
import { OutboxRelay } from './outbox/relay.js';
import { MultipartService, UPLOAD_TTL_S } from './uploads/multipart-service.js';
import { ObjectService } from './uploads/object-service.js';

/** The largest body kept inline by default: the size below which the other small-object paths apply too. */
export const DEFAULT_INLINE_BLOB_BYTES = SMALL_READ;

/**
 * Production adapters come from the ProductionSettings fields (env in main.ts): `pgUrl` (+
 * `pgReplicaUrls`: read/write splitting, reads `latest` by default since other processes write too),
 * `redisNodes` (multipart state on the Redis Cluster), `amqpUrl` (the outbox relay publishes to
 * RabbitMQ). An injected `sql`/`cache`/`broker` wins over them.
 */
export interface DataPlaneOptions extends ProductionSettings {
  /** Port to listen on; 0 picks a free one (tests). Default 9001. */
  port?: number;
  host?: string;
  /** A request body silent this long (ms) is refused 400 RequestTimeout, an answer its caller reads nothing of this long is cut, each with its connection (default 60 s, internal-api.ts; 0: no limit). */
  bodyIdleTimeoutMs?: number;
  readerIdleTimeoutMs?: number;
  /** Shared secret every internal call must carry in `x-strata-internal-token`. */
  internalToken: string;
  /** Blobs go under `<dataDir>/blobs` (filesystem backend). */
  dataDir: string;
  /** Whether fs buckets are served (default true; false where several data planes share no volume: refused). */
  fsBackend?: boolean;
  /** The server secret (STRATA_SECRET_KEY) that opens operator-made buckets' sealed backend secret keys. */
  secretKey?: string;
  /** The S3-compatible backends (`minio`, `cloud`) buckets may choose. Default: from env (`STRATA_BACKEND_*`, see backends/config.ts). */
  backends?: BackendsConfig;
  /**
   * The metadata database, whose schema the control plane migrates (start the control plane first,
   * or at least before the first request). Injected clients are shared and NOT closed on stop;
   * otherwise `pgUrl` opens a pool (closed on stop).
   */
  sql?: SqlClient;
  pgUrl?: string;
  /** Cache holding multipart state (in-memory by default). Not closed on stop. */
  cache?: Cache;
  /**
   * Cache for multipart state only, e.g. one whose writes wait for replicas. Not closed on stop. Without
   * it, `redisNodes` with `redisReplicaAcks` > 0 opens one of its own (closed on stop); else `cache`.
   */
  multipartCache?: Cache;
  /** Broker the outbox relay publishes to. Without one, events stay in the outbox until a relay with a broker runs. */
  broker?: EventPublisher;
  /** How often unsent outbox events are retried. Default 5000 ms. */
  outboxRetryMs?: number;
  /**
   * How often the cleanup job runs (blobs nobody references, which are also freed at once; temp,
   * orphan and stale part files). It also runs once at start. Default 10 minutes; 0 = only at start.
   */
  blobSweepMs?: number;
  /**
   * Memory for the bytes of small blobs (up to 64 KiB) of the filesystem backend read recently, in MiB
   * (least recently used out first; blobs never change, so no entry is ever stale). Default 16; 0 = off.
   */
  smallBlobCacheMb?: number;
  /**
   * Bodies of at most this many bytes (with a Content-Length) on the filesystem backend are kept inline:
   * in their blob's database row, committed with the object, instead of a file (see InlineBlobs in
   * backends/fs-backend.ts). Default DEFAULT_INLINE_BLOB_BYTES; 0 = every body in a file.
   */
  inlineBlobBytes?: number;
  /**
   * Large bodies on the filesystem backend are written with O_DIRECT, past the page cache, where the file
   * system allows it (see FileSink in backends/file-sink.ts). Default true.
   */
  directIo?: boolean;
  /** In-progress multipart uploads one account may have at once (SlowDown past it). Default DEFAULT_UPLOADS_PER_ACCOUNT. */
  multipartUploadsPerAccount?: number;
  /** Age below which a temp file or an unreferenced blob file may still belong to a live request. Default 1 hour. */
  orphanGraceMs?: number;
  /**
   * Server-side encryption keys (encryption/key-store.ts): the SSE-S3 key-encryption key and former ones,
   * the built-in KMS's named keys. Without a master key SSE-S3 and SSE-KMS are refused (SSE-C needs none).
   * `keyStores` replaces the built-in stores (an external KMS).
   */
  encryptionKeys?: EncryptionKeySettings;
  keyStores?: { master?: KeyStore; kms?: KeyStore };
  /** Injected clock (tests). */
  clock?: () => Date;
  logger?: Logger;
  registry?: Registry;
}

/**
 * Start the data plane: object bytes on storage backends, instant upload, multipart, copy, blob
 * freeing and the outbox relay. Returns the kit's RunningService; stop() drains HTTP, then stops
 * the relay and the sweep and closes what this call opened.
 */
export async function startDataPlane(opts: DataPlaneOptions): Promise<RunningService> {
  const name = 'data-plane';
  const logger = opts.logger ?? createLogger(name);
  const registry = opts.registry ?? createRegistry(name);
  const clock = opts.clock ?? (() => new Date());
  const onClose: Array<() => Promise<void> | void> = [];

  if (!opts.sql && !opts.pgUrl) throw new Error('data plane: a SqlClient (sql) or a PostgreSQL URL (pgUrl) is required');
  const sql = opts.sql ?? createProductionSql(opts, { defaultRead: 'latest', registry, logger })!;

  const metrics = dataPlaneMetrics(registry);
  const cacheCounters = cacheMetrics(registry);
  const smallBlobCacheMb = opts.smallBlobCacheMb ?? 16;
  const smallBlobs =
    smallBlobCacheMb > 0
      ? new SmallBlobCache(smallBlobCacheMb * 1024 * 1024, SMALL_READ, (hit) =>
          (hit ? cacheCounters.hits : cacheCounters.misses).inc({ cache: 'data-plane-small-blobs' }),
        )
      : undefined;
  const catalog = new Catalog(sql);
  const fs: FsBackend = new FsBackend(opts.dataDir, {
    smallBlobs,
    directIo: opts.directIo,
    inline: { maxBytes: opts.inlineBlobBytes ?? DEFAULT_INLINE_BLOB_BYTES, load: (locator) => catalog.inlineBlob(fs.key, locator) },
  });
  const backends = new BackendRegistry(
    fs,
    opts.backends ?? backendsConfigFromEnv(),
    logger,
    opts.secretKey ? new SecretBox(opts.secretKey) : undefined,
    opts.fsBackend ?? true,
  );
  const collector = new BlobCollector(catalog, backends, logger);
  const ownCache = opts.cache ? undefined : createProductionCache(opts, logger);
  // Multipart state lives only in the cache: an outage answers ServiceUnavailable (clients retry).
  const cache: Cache = countedCache(opts.cache ?? ownCache ?? new InMemoryCache(), cacheCounters, name);
  // Multipart state lives only in the cache: with replicas, its writes wait for one (a failover then
  // loses no acknowledged part); the read cache's writes do not (they would wait for nothing it needs).
  // A master without a live replica still takes them (on its AOF): counted, and logged every 10 s at most.
  let unreplicatedLoggedAt = 0;
  const ownMultipartCache =
    opts.multipartCache || !opts.redisReplicaAcks
      ? undefined
      : createProductionCache(opts, logger, {
          replicaAcks: opts.redisReplicaAcks,
          onUnreplicatedWrite: (write) => {
            cacheCounters.unreplicated.inc({ cache: name, operation: write.operation });
            if (Date.now() - unreplicatedLoggedAt < 10_000) return;
            unreplicatedLoggedAt = Date.now();
            logger.warn(write, 'multipart state written without a replica acknowledgement (its master has no live replica): kept on the master and its AOF');
          },
        });
  const multipartCache: Cache = opts.multipartCache
    ? countedCache(opts.multipartCache, cacheCounters, name)
    : ownMultipartCache
      ? countedCache(ownMultipartCache, cacheCounters, name)
      : cache;
  const publisher: EventPublisher | undefined =
    opts.broker ??
    (opts.amqpUrl
      ? new AmqpEventPublisher({
          url: opts.amqpUrl,
          exchange: opts.amqpExchange,
          logger,
          onStateChange: amqpConnectionMetrics(registry)('strata-data-plane'),
        }).start()
      : undefined);

  let relay: OutboxRelay | undefined;
  if (publisher) {
    relay = new OutboxRelay(catalog, publisher, metrics.outboxBacklog, logger, clock);
    relay.start(opts.outboxRetryMs ?? 5000);
    const r = relay;
    onClose.unshift(() => r.stop());
  } else {
    logger.warn('no event broker: outbox events are kept until a relay with a broker runs');
  }
  // Leftovers of a crash (temp files, blob files never committed, unfreed blobs, expired parts): stale
  // files are removed before serving; the rest, which needs the database (whose schema may not exist
  // yet), in the background, then periodically. A day of slack past the upload TTL, so that a part of
  // a live upload is never taken.
  const cleanup = new CleanupJob(catalog, collector, backends.sweepable, logger, {
    graceMs: opts.orphanGraceMs,
    partMaxAgeMs: (UPLOAD_TTL_S + 24 * 3600) * 1000,
  });
  await cleanup.removeStaleFiles();
  cleanup.start(opts.blobSweepMs ?? 600_000);
  onClose.unshift(() => cleanup.stop());

  // After the relay and the sweeps have stopped (those were put first): what this call opened.
  if (publisher && !opts.broker) onClose.push(() => (publisher as AmqpEventPublisher).close());
  if (ownCache) onClose.push(() => ownCache.close());
  if (ownMultipartCache) onClose.push(() => ownMultipartCache.close());
  if (!opts.sql) onClose.push(() => sql.close());

  const encryption = new ObjectEncryption(opts.keyStores ?? keyStoresFrom(opts.encryptionKeys ?? {}));
  const objects = new ObjectService(catalog, backends, collector, { committed: () => relay?.kick() }, metrics, logger, clock, cache, encryption);
  const multipart = new MultipartService(multipartCache, objects, backends, metrics, logger, clock, { uploadsPerAccount: opts.multipartUploadsPerAccount });

  const serviceOpts = { name, logger, registry, readiness: { database: () => catalog.ping() }, onClose };
  const app = createApp(serviceOpts);
  // Internal answers are never cached by anyone: no hash of every JSON body for an ETag header.
  app.set('etag', false);
  const httpCounts = httpMetrics(registry);
  const internalToken = requireInternalToken(opts.internalToken);
  const renderError = internalErrorHandler(logger, dataPlaneErrors(logger));
  app.use(httpCounts.middleware);
  app.use('/internal', internalToken, dataPlaneRoutes({ objects, multipart, collector, kickOutbox: () => relay?.kick() }), backendRoutes(backends));
  app.use(renderError);
  // Object PUT/GET/HEAD (every S3 object read and write) on Node's own request and response; the rest of the internal API is Express's.
  const objectRequest = objectRoute(objects);
  const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const serve = objectRequest(req);
    if (!serve) {
      app(req, res);
      return;
    }
    httpCounts.observe(req, res, OBJECT_ROUTE);
    runChain([internalToken, () => serve(res)], req, res, renderError);
  };
  return listen(Object.assign(listener, { locals: app.locals }), {
    ...serviceOpts,
    port: opts.port ?? 9001,
    host: opts.host,
    slowClients: internalSlowClients(opts),
  });
}
