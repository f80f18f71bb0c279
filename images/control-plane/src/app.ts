import express from 'express';
import type { ScheduledTask } from 'node-cron';
import {
  amqpConnectionMetrics,
  cacheMetrics,
  countedCache,
  Counter,
  createApp,
  createLogger,
  createPgliteSqlClient,
  createProductionCache,
  createProductionSql,
  createRegistry,
  degradeWhenUnavailable,
  httpMetrics,
  InMemoryCache,
  listen,
  SecretBox,
  type Logger,
  type ProductionSettings,
  type Registry,
  type RunningService,
  type SqlClient,
  type StringCache,
} from '../../service-kit/src/index.js';
import { internalErrorHandler, internalSlowClients, requireInternalToken } from '../../object-model/src/index.js';
import { AmqpEventBroker } from './events/amqp-broker.js';
import type { EventBroker } from './events/broker.js';
import { startEventConsumer } from './events/consumer.js';
import { dataPlaneOutboxKick, kickOutboxAfterWrites } from './events/outbox-kick.js';
import { InMemoryBroker } from './events/memory-broker.js';
import { controlPlaneRoutes } from './http/routes.js';
import { scopedKeyRoutes } from './http/scoped-key-routes.js';
import { SqlMetadataStore } from './metadata/sql-store.js';
import { dataPlaneBackendCheck } from './backends/backend-check.js';
import { HttpBlobCollector, HttpUploadExpirer } from './purge/data-plane-gc.js';
import { runPurge, schedulePurge, type PurgeDeps } from './purge/purge-job.js';
import { migrate } from './schema/migrate.js';
import { invalidateObjectRead } from '../../object-model/src/object-read-cache.js';
import { bucketNameHoldMs } from '../../object-model/src/bucket-resolution.js';
import { UserService } from './users/user-service.js';

export const DAILY_PURGE_SCHEDULE = '0 3 * * *';
/** Longer than the one cache that resolves bucket names, the gateway's (see ControlPlaneOptions.bucketNameHoldMs). */
export const DEFAULT_BUCKET_NAME_HOLD_MS = bucketNameHoldMs();

/**
 * Production adapters come from the ProductionSettings fields (env in main.ts): `pgUrl` (+
 * `pgReplicaUrls`: read/write splitting, reads `latest` by default since other processes write too),
 * `redisNodes` (Redis Cluster cache), `amqpUrl` (RabbitMQ consumer). An injected `sql`/`cache`/`broker`
 * wins over them; with neither, the embedded defaults (PGlite in memory, in-memory cache and broker).
 */
export interface ControlPlaneOptions extends ProductionSettings {
  /** Port to listen on; 0 picks a free one (tests). Default 9002. */
  port?: number;
  host?: string;
  /** A request body silent this long (ms) is refused 400 RequestTimeout, an answer its caller reads nothing of this long is cut, each with its connection (default 60 s, internal-api.ts; 0: no limit). */
  bodyIdleTimeoutMs?: number;
  readerIdleTimeoutMs?: number;
  /** Shared secret every internal call must carry in `x-strata-internal-token`. */
  internalToken: string;
  /** Server key that seals users' SigV4 secrets (AES-256-GCM). */
  secretKey: string;
  /** Root credentials (also root's SigV4 access key and secret). Root is created or refreshed at start. */
  rootUser?: string;
  rootPassword?: string;
  /**
   * The metadata database. Injected clients are shared and NOT closed on stop. Otherwise `pgUrl`
   * opens a pool (closed on stop), and with neither an in-memory PGlite is used.
   */
  sql?: SqlClient;
  pgUrl?: string;
  /** Cache (in-memory by default). Shared instances are not closed on stop. */
  cache?: StringCache;
  /** Event broker the consumer subscribes to (in-memory by default). Not closed on stop when injected. */
  broker?: EventBroker;
  /** Where the data plane listens, for freeing blob bytes after purge; a function when known only later. */
  dataPlaneUrl?: string | (() => string | undefined);
  /** Cron expression for the in-process purge (e.g. DAILY_PURGE_SCHEDULE), or false (default: off). */
  purgeSchedule?: string | false;
  /** Days an object stays in the recycle bin before purge makes it DELETED. Default 30. */
  retentionDays?: number;
  /**
   * How long a deleted bucket's name stays with its last owner before another account may create it
   * (ms). The gateway resolves a name once per request from its cache (STRATA_BUCKET_CACHE_MS) and hands
   * the record down; this service reads records uncached (hack/adr/0007-bucket-resolution.md). Until the
   * gateway's record expires, a name re-created at once could still lead a request that reaches a plane
   * by name to the old owner; the hold outlasts it. Default: the gateway cache's default lifetime plus a
   * margin (bucketNameHoldMs in object-model); who raises STRATA_BUCKET_CACHE_MS raises this as well.
   */
  bucketNameHoldMs?: number;
  /** Whether new buckets may use the fs backend (default true; false where the data planes share no volume). */
  fsBackend?: boolean;
  /** Injected clock (tests). */
  clock?: () => Date;
  logger?: Logger;
  registry?: Registry;
}

/**
 * Start the control plane: migrate the schema, bootstrap root, consume events, serve the internal
 * API. Returns the kit's RunningService; stop() drains HTTP, then stops the consumer and the purge
 * schedule and closes what this call opened.
 */
export async function startControlPlane(opts: ControlPlaneOptions): Promise<RunningService> {
  const name = 'control-plane';
  const logger = opts.logger ?? createLogger(name);
  const registry = opts.registry ?? createRegistry(name);
  const clock = opts.clock ?? (() => new Date());
  const onClose: Array<() => Promise<void> | void> = [];

  const sql = opts.sql ?? createProductionSql(opts, { defaultRead: 'latest', registry, logger }) ?? (await createPgliteSqlClient());
  try {
    await migrate(sql, logger);
  } catch (err) {
    if (!opts.sql) await sql.close();
    throw err;
  }
  const store = new SqlMetadataStore(sql);
  const users = new UserService(store.users, opts.secretKey, store.scopedKeys);
  if (opts.rootUser && opts.rootPassword) {
    await users.bootstrapRoot(opts.rootUser, opts.rootPassword);
    logger.info({ rootUser: opts.rootUser }, 'root user ready');
  }
  const ownCache = opts.cache ? undefined : createProductionCache(opts, logger);
  if (ownCache) onClose.push(() => ownCache.close());
  // Lookups counted (hit ratio); a cache outage reads as a miss, so requests go to the database.
  let lastDegradeLog = 0;
  const cache: StringCache = degradeWhenUnavailable(countedCache(opts.cache ?? ownCache ?? new InMemoryCache(), cacheMetrics(registry), name), (err) => {
    // Once per 10 s at most: during an outage every request would log it.
    if (Date.now() - lastDegradeLog < 10_000) return;
    lastDegradeLog = Date.now();
    logger.warn({ err: err.message }, 'cache unavailable; answering from the database');
  });
  const broker: EventBroker =
    opts.broker ??
    (opts.amqpUrl
      ? new AmqpEventBroker({
          url: opts.amqpUrl,
          exchange: opts.amqpExchange,
          queuePrefix: opts.amqpQueuePrefix,
          logger,
          onStateChange: amqpConnectionMetrics(registry)('strata-control-plane'),
        }).start()
      : new InMemoryBroker());
  if (!opts.broker) onClose.push(() => broker.close());
  if (!opts.sql) onClose.push(() => sql.close());

  const consumed = new Counter({
    name: 'strata_events_consumed_total',
    help: 'Object-store events handled by the control plane, by type and outcome (applied, duplicate, failed)',
    labelNames: ['type', 'outcome'] as const,
    registers: [registry],
  });
  const purgedTotal = new Counter({ name: 'strata_objects_purged_total', help: 'Recycled objects purged (made DELETED)', registers: [registry] });
  const lifecycleTotal = new Counter({
    name: 'strata_lifecycle_actions_total',
    help: "What buckets' lifecycle rules did: objects expired into the recycle bin, incomplete multipart uploads aborted",
    labelNames: ['action'] as const,
    registers: [registry],
  });

  const subscription = await startEventConsumer({ broker, inbox: store.inbox, logger, consumed });
  onClose.unshift(() => subscription.close());

  const dataPlaneUrl = opts.dataPlaneUrl;
  const dataPlaneAt = typeof dataPlaneUrl === 'function' ? dataPlaneUrl : () => dataPlaneUrl;
  const collector = new HttpBlobCollector(dataPlaneAt, opts.internalToken);
  const kickOutbox = dataPlaneOutboxKick(dataPlaneAt, opts.internalToken, logger);
  const uploads = new HttpUploadExpirer(dataPlaneAt, opts.internalToken);
  const purgeDeps: PurgeDeps = {
    store,
    collector,
    retentionDays: opts.retentionDays ?? 30,
    logger,
    purgedTotal,
    lifecycleTotal,
    kickOutbox,
    uploads,
    invalidate: (bucket, key) => invalidateObjectRead(cache, bucket, key),
  };
  let task: ScheduledTask | undefined;
  if (opts.purgeSchedule) {
    task = schedulePurge(opts.purgeSchedule, purgeDeps, clock);
    onClose.unshift(() => task?.stop());
    logger.info({ schedule: opts.purgeSchedule }, 'recycle-bin purge scheduled');
  }

  const serviceOpts = { name, logger, registry, readiness: { database: () => store.ping() }, onClose };
  const app = createApp(serviceOpts);
  // Internal answers are never cached by anyone: no hash of every JSON body for an ETag header.
  app.set('etag', false);
  app.use(httpMetrics(registry).middleware);
  app.use('/internal', requireInternalToken(opts.internalToken), express.json({ limit: '2mb' }), kickOutboxAfterWrites(kickOutbox));
  app.use('/internal', scopedKeyRoutes(users));
  app.use(
    '/internal',
    controlPlaneRoutes({
      store,
      users,
      cache,
      collector,
      uploads,
      checkBackend: dataPlaneBackendCheck(dataPlaneAt, opts.internalToken),
      secrets: new SecretBox(opts.secretKey),
      purge: (now) => runPurge(purgeDeps, now),
      clock,
      bucketNameHoldMs: opts.bucketNameHoldMs ?? DEFAULT_BUCKET_NAME_HOLD_MS,
      fsBackend: opts.fsBackend ?? true,
      logger,
    }),
  );
  app.use(internalErrorHandler(logger));
  return listen(app, { ...serviceOpts, port: opts.port ?? 9002, host: opts.host, slowClients: internalSlowClients(opts) });
}
