import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import {
  amqpConnectionMetrics,
  createLogger,
  createPgliteSqlClient,
  createProductionCache,
  createProductionSql,
  createRegistry,
  InMemoryCache,
  type Logger,
  type ProductionSettings,
  type Registry,
  type RunningService,
  type SqlClient,
} from '../../service-kit/src/index.js';
import { startControlPlane } from '../../control-plane/src/app.js';
import { AmqpEventBroker } from '../../control-plane/src/events/amqp-broker.js';
import type { EventBroker } from '../../control-plane/src/events/broker.js';
import { InMemoryBroker } from '../../control-plane/src/events/memory-broker.js';
import type { Cache } from '../../data-plane/src/cache/cache.js';
import { startDataPlane } from '../../data-plane/src/app.js';
import { startGateway } from '../../gateway/src/app.js';
import { localModelServerKey } from './model-server-key.js';
import { ephemeralSecret, persistentSecret } from './secrets.js';
import type { EncryptionKeySettings } from '../../data-plane/src/encryption/key-store.js';
import { startPgliteVacuum } from './pglite-vacuum.js';
import type { ObjectOwnership } from '../../object-model/src/access-control.js';
import type { AccessLogSettings } from '../../gateway/src/access-log/delivery.js';

/** `<bucket>.localhost`: many systems resolve every name under localhost to this machine. */
export const DEFAULT_S3_DOMAINS: readonly string[] = ['localhost'];

/** What the standalone platform is started with (env supplies it in main.ts; tests pass it). */
export interface PlatformOptions {
  dataDir: string;
  host?: string;
  ports?: { gateway?: number; dataPlane?: number; controlPlane?: number; modelServer?: number; poemApp?: number; imageSearch?: number };
  rootUser?: string;
  rootPassword?: string;
  internalToken?: string;
  jwtSecret?: string;
  secretKey?: string;
  /**
   * Server-side encryption keys of the data plane (STRATA_SSE_*). Without a master key one is generated
   * once per data dir and kept there (`secrets/sse-master-key`), like the other secrets: losing it loses
   * every SSE-S3 object.
   */
  encryptionKeys?: EncryptionKeySettings;
  jwtExpiresIn?: string;
  publicUrl?: string;
  /** Domains whose subdomains name buckets (virtual-hosted style); default DEFAULT_S3_DOMAINS. */
  s3Domains?: readonly string[];
  /** Origins of browser pages allowed to call the gateway (default any). */
  corsOrigins?: readonly string[];
  /** Whether the gateway accepts AWS Signature Version 2 (default true). */
  gatewaySignatureV2?: boolean;
  gatewayRulesFile?: string;
  /** Bytes of small-object answers the gateway keeps (default 8 MiB; 0 turns them off). */
  gatewayAnswerCacheBytes?: number;
  /** A request body silent this long is answered 400 RequestTimeout (default 20 s; 0: off). */
  gatewayBodyIdleTimeoutMs?: number;
  /** Refuse and ignore public ACLs everywhere (STRATA_BLOCK_PUBLIC_ACLS). */
  blockPublicAcls?: boolean;
  /** The object ownership of a bucket created without `x-amz-object-ownership` (STRATA_DEFAULT_OBJECT_OWNERSHIP; default BucketOwnerEnforced). */
  defaultObjectOwnership?: ObjectOwnership;
  /** How the gateway gathers and writes server access-log lines (STRATA_ACCESS_LOG_*). */
  accessLog?: Partial<AccessLogSettings>;
  /** Largest body the data plane keeps inline in the database (default 64 KiB; 0: every body in a file). */
  inlineBlobBytes?: number;
  /** Large bodies written with O_DIRECT where the file system allows it (default true). */
  directIo?: boolean;
  /** The embedded PGlite database syncs its commits and checkpoints to disk (default true; images/service-kit/src/pglite-fsync.ts). */
  pgliteFsync?: boolean;
  /** How often the embedded PGlite database's tables are checked for a due VACUUM / ANALYZE (ms; it runs no autovacuum). */
  pgliteVacuumMs?: number;
  /** Cron expression of the in-process purge, or false. */
  purgeSchedule?: string | false;
  logLevel?: string;
  /**
   * The object store's production servers (STRATA_PG_URL, STRATA_PG_REPLICA_URLS, STRATA_REDIS_NODES,
   * STRATA_AMQP_URL...; see hack/docs/production-servers.md). Each one set replaces its embedded default:
   * PostgreSQL (+ replicas) for PGlite, the Redis Cluster for the in-memory cache, RabbitMQ for the
   * in-memory broker. One client of each is shared by the services, as the embedded ones are.
   */
  production?: ProductionSettings;
  /**
   * Environment the AI services read their own settings from (API_*, IMAGE_*, LLM_*, MODEL_*; see
   * images/<service>/README.md). Ports, data locations and the poem app's upstream are set by the platform unless given.
   */
  env?: NodeJS.ProcessEnv;
}

/**
 * What every service of the platform is started with: the embedded defaults shared in-process
 * (one PGlite database, one in-memory cache, one in-memory broker), secrets, and the URLs of the
 * services started before it.
 */
export interface PlatformContext {
  options: PlatformOptions;
  sql: SqlClient;
  cache: Cache;
  broker: EventBroker;
  /** The control plane's metrics registry; also counts the shared SQL client's replica routing. */
  controlPlaneRegistry: Registry;
  internalToken: string;
  jwtSecret: string;
  secretKey: string;
  encryptionKeys: EncryptionKeySettings;
  rootUser: string;
  rootPassword: string;
  logger: (service: string) => Logger;
  /** URL of each service started so far, by name. */
  urls: Record<string, string>;
  /** What a service says about itself in the banner (e.g. "demo test encoder"), by name. */
  notes: Record<string, string[]>;
}

/** One service of the platform. Adding a service to `npm start` is one more entry in PLATFORM_SERVICES. */
export interface PlatformService {
  name: string;
  start(ctx: PlatformContext): Promise<RunningService>;
}

/** The object store, in start order (stopped in reverse). */
export const OBJECT_STORE_SERVICES: PlatformService[] = [
  {
    name: 'control-plane',
    start: (ctx) =>
      startControlPlane({
        port: ctx.options.ports?.controlPlane ?? 9002,
        host: '127.0.0.1',
        internalToken: ctx.internalToken,
        secretKey: ctx.secretKey,
        rootUser: ctx.rootUser,
        rootPassword: ctx.rootPassword,
        sql: ctx.sql,
        // The control plane's cache interface is a subset of the data plane's: one instance serves both.
        cache: ctx.cache,
        broker: ctx.broker,
        registry: ctx.controlPlaneRegistry,
        dataPlaneUrl: () => ctx.urls['data-plane'],
        purgeSchedule: ctx.options.purgeSchedule ?? false,
        logger: ctx.logger('control-plane'),
      }),
  },
  {
    name: 'data-plane',
    start: (ctx) =>
      startDataPlane({
        port: ctx.options.ports?.dataPlane ?? 9001,
        host: '127.0.0.1',
        internalToken: ctx.internalToken,
        secretKey: ctx.secretKey,
        dataDir: ctx.options.dataDir,
        sql: ctx.sql,
        cache: ctx.cache,
        broker: ctx.broker,
        inlineBlobBytes: ctx.options.inlineBlobBytes,
        directIo: ctx.options.directIo,
        // With replica acks, multipart state gets a Redis connection of its own whose writes wait for a replica.
        redisNodes: ctx.options.production?.redisNodes,
        redisPassword: ctx.options.production?.redisPassword,
        redisKeyPrefix: ctx.options.production?.redisKeyPrefix,
        redisTimeoutMs: ctx.options.production?.redisTimeoutMs,
        redisReplicaAcks: ctx.options.production?.redisReplicaAcks,
        encryptionKeys: ctx.encryptionKeys,
        logger: ctx.logger('data-plane'),
      }),
  },
  {
    name: 'gateway',
    start: (ctx) =>
      startGateway({
        port: ctx.options.ports?.gateway ?? 9000,
        host: ctx.options.host ?? '127.0.0.1',
        controlPlaneUrl: ctx.urls['control-plane'],
        dataPlaneUrl: ctx.urls['data-plane'],
        internalToken: ctx.internalToken,
        jwtSecret: ctx.jwtSecret,
        jwtExpiresIn: ctx.options.jwtExpiresIn,
        publicUrl: ctx.options.publicUrl,
        virtualHostDomains: ctx.options.s3Domains ?? DEFAULT_S3_DOMAINS,
        corsOrigins: ctx.options.corsOrigins,
        signatureV2: ctx.options.gatewaySignatureV2,
        rootUser: ctx.rootUser,
        flowRulesFile: ctx.options.gatewayRulesFile,
        // The cache holding the data plane's object version tokens: small GETs answered by the gateway.
        objectReadCache: ctx.cache,
        objectAnswerCacheBytes: ctx.options.gatewayAnswerCacheBytes,
        bodyIdleTimeoutMs: ctx.options.gatewayBodyIdleTimeoutMs,
        blockPublicAcls: ctx.options.blockPublicAcls,
        defaultObjectOwnership: ctx.options.defaultObjectOwnership,
        accessLog: ctx.options.accessLog,
        trustProxy: ctx.options.env?.STRATA_TRUST_PROXY || undefined,
        // Rate-limit counters on the Redis Cluster when there is one.
        redisNodes: ctx.options.production?.redisNodes,
        redisPassword: ctx.options.production?.redisPassword,
        redisKeyPrefix: ctx.options.production?.redisKeyPrefix ? `${ctx.options.production.redisKeyPrefix}strata:flow:` : undefined,
        logger: ctx.logger('gateway'),
      }),
  },
];

/** An environment variable of `env`, or `fallback` when it is unset or empty. */
function envOr(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const value = env[name]?.trim();
  return value ? value : fallback;
}

/**
 * Model serving and image search. Each reads its own variables from `options.env`; the platform
 * supplies the port, keeps state under the data dir and points the poem app at the local model server.
 * Each service's code is imported when it starts, so a platform started without it (e.g. the object
 * store alone, STRATA_DISABLED_SERVICES) neither compiles its modules nor loads its native libraries
 * (ONNX Runtime, libvips, FAISS/OpenBLAS).
 */
export const AI_SERVICES: PlatformService[] = [
  {
    name: 'model-server',
    start: async (ctx) => {
      const [{ startModelServer }, { modelServerConfigFromEnv }] = await Promise.all([
        import('../../model-server/src/app.js'),
        import('../../model-server/src/config.js'),
      ]);
      return startModelServer({
        ...modelServerConfigFromEnv({ ...ctx.options.env, MODEL_SERVER_TRUNCATE_PROMPT: envOr(ctx.options.env ?? {}, 'MODEL_SERVER_TRUNCATE_PROMPT', 'true') }),
        // The poem app's prompts are longer than the tiny model's 64-token context: keep their tail.
        port: ctx.options.ports?.modelServer ?? 8000,
        host: ctx.options.host ?? '127.0.0.1',
        logger: ctx.logger('model-server'),
      });
    },
  },
  {
    name: 'poem-app',
    start: async (ctx) => {
      const [{ startPoemApp }, { loadPoemAppConfig }] = await Promise.all([import('../../poem-app/src/app.js'), import('../../poem-app/src/config.js')]);
      const env = ctx.options.env ?? {};
      const upstream = envOr(env, 'API_BASE_URL', `${ctx.urls['model-server'] ?? 'http://127.0.0.1:8000'}/v1`);
      // The local model server's key, when it asks for one and the user gave the poem app none.
      const key = env.API_KEY || env.OPENAI_API_KEY ? undefined : localModelServerKey(env, upstream, ctx.urls['model-server']);
      const config = loadPoemAppConfig({
        ...env,
        ...(key ? { API_KEY: key } : {}),
        PORT: String(ctx.options.ports?.poemApp ?? 3000),
        DATABASE_URL: envOr(env, 'DATABASE_URL', path.join(ctx.options.dataDir, 'poem-app', 'poems.db')),
        API_BASE_URL: upstream,
        // The tiny model answers at most 64 tokens; ask for what it can give unless told otherwise.
        API_MAX_TOKENS: envOr(env, 'API_MAX_TOKENS', '64'),
        // The built-in model that writes verse (strata-tiny answers token ids), unless another upstream is named.
        ...(env.API_BASE_URL ? {} : { API_MODEL: envOr(env, 'API_MODEL', 'strata-verse') }),
      });
      return startPoemApp({ ...config, host: ctx.options.host ?? '127.0.0.1', logger: ctx.logger('poem-app') });
    },
  },
  {
    name: 'image-search',
    start: async (ctx) => {
      const env = ctx.options.env ?? {};
      const dir = path.join(ctx.options.dataDir, 'image-search');
      const [{ startImageSearch }, { indexEngine, ENABLE_FAISS }, { prepareImageSearchDemo, waitForIndexed }] = await Promise.all([
        import('../../image-search/src/app.js'),
        import('../../image-search/src/index/engine.js'),
        import('./image-search-demo.js'),
      ]);
      // No model or images of the user's own: the test encoder and demo images, so a search answers at once.
      const demo = await prepareImageSearchDemo(dir, env);
      // An LLM that is the local model server gets its key, unless the user gave one.
      const llmKey = env.LLM_API_KEY ? undefined : localModelServerKey(env, env.LLM_BASE_URL, ctx.urls['model-server']);
      const running = await startImageSearch({
        env: {
          ...env,
          ...demo.env,
          ...(llmKey ? { LLM_API_KEY: llmKey } : {}),
          PORT: String(ctx.options.ports?.imageSearch ?? 8080),
          IMAGE_SEARCH_INDEX_DIR: envOr(env, 'IMAGE_SEARCH_INDEX_DIR', path.join(dir, 'index')),
          IMAGE_SEARCH_MODEL_CACHE_DIR: envOr(env, 'IMAGE_SEARCH_MODEL_CACHE_DIR', path.join(dir, 'model-cache')),
          // A bucket source (IMAGE_SEARCH_SOURCE_S3_URL) or model object is read from this platform's own gateway as root.
          IMAGE_SEARCH_S3_ENDPOINT: envOr(env, 'IMAGE_SEARCH_S3_ENDPOINT', ctx.urls.gateway ?? 'http://127.0.0.1:9000'),
          IMAGE_SEARCH_S3_ACCESS_KEY_ID: envOr(env, 'IMAGE_SEARCH_S3_ACCESS_KEY_ID', ctx.rootUser),
          IMAGE_SEARCH_S3_SECRET_ACCESS_KEY: envOr(env, 'IMAGE_SEARCH_S3_SECRET_ACCESS_KEY', ctx.rootPassword),
          // Callers are told by the tokens its gateway issues (POST /login): a user sees the images of
          // their own buckets; changing the index takes the root's token (or IMAGE_SEARCH_API_KEY).
          STRATA_JWT_SECRET: ctx.jwtSecret,
          IMAGE_SEARCH_ADMIN_USERS: envOr(env, 'IMAGE_SEARCH_ADMIN_USERS', ctx.rootUser),
        },
        host: ctx.options.host ?? '127.0.0.1',
        // With IMAGE_SEARCH_SOURCE_S3_URL set, images put into that bucket are indexed at once.
        objectEvents: ctx.broker,
        // The banner names the demo encoder (notes below): no warning line before it.
        testEncoderNoted: demo.testEncoder,
        logger: ctx.logger('image-search'),
      });
      if (demo.imagesWritten) await waitForIndexed(running.url, demo.imagesWritten);
      ctx.notes['image-search'] = [
        ...(demo.testEncoder ? ['demo test encoder: colours and textures, not CLIP (a real model: images/image-search/README.md)'] : []),
        ...(indexEngine().kind === 'exact' ? [`exact in-process index (for FAISS: ${ENABLE_FAISS})`] : []),
      ];
      return running;
    },
  },
];

/** Everything `npm start` runs, in start order. */
export const PLATFORM_SERVICES: PlatformService[] = [...OBJECT_STORE_SERVICES, ...AI_SERVICES];

export interface RunningPlatform {
  services: RunningService[];
  /** URL of each running service by name (gateway first for humans). */
  urls: Record<string, string>;
  /** What services say about themselves in the banner, by name. */
  notes: Record<string, string[]>;
  rootUser: string;
  rootPassword: string;
  stop(): Promise<void>;
}

/** Start every platform service in one process on the shared embedded state under `dataDir`. */
export async function startPlatform(options: PlatformOptions, services: PlatformService[] = PLATFORM_SERVICES): Promise<RunningPlatform> {
  await mkdir(options.dataDir, { recursive: true });
  const prod = options.production ?? {};
  const logger = createLogger('standalone', options.logLevel);
  const controlPlaneRegistry = createRegistry('control-plane');
  // One SQL client for every service: `session` reads then cover every write of the platform.
  const productionSql = createProductionSql(prod, { defaultRead: 'session', registry: controlPlaneRegistry, logger });
  const sql =
    productionSql ??
    (await createPgliteSqlClient(path.join(options.dataDir, 'pglite'), {
      thread: true,
      fsync: options.pgliteFsync ?? true,
      logger,
      registry: controlPlaneRegistry,
    }));
  const stopVacuum = productionSql ? undefined : startPgliteVacuum(sql, logger, options.pgliteVacuumMs);
  const redisCache = createProductionCache(prod, logger);
  // One AMQP broker: the data plane's outbox relay publishes through it, the control plane consumes.
  const broker: EventBroker = prod.amqpUrl
    ? new AmqpEventBroker({
        url: prod.amqpUrl,
        exchange: prod.amqpExchange,
        queuePrefix: prod.amqpQueuePrefix,
        connectionName: 'strata-standalone',
        logger,
        onStateChange: amqpConnectionMetrics(controlPlaneRegistry)('strata-standalone'),
      }).start()
    : new InMemoryBroker();
  const ctx: PlatformContext = {
    options,
    sql,
    cache: redisCache ?? new InMemoryCache(),
    broker,
    controlPlaneRegistry,
    internalToken: options.internalToken ?? ephemeralSecret(),
    jwtSecret: options.jwtSecret ?? (await persistentSecret(options.dataDir, 'jwt-secret')),
    secretKey: options.secretKey ?? (await persistentSecret(options.dataDir, 'server-key')),
    encryptionKeys: {
      ...options.encryptionKeys,
      // The generated secret is 32 random bytes in hex: the key is those bytes (base64, as the setting takes it).
      masterKey: options.encryptionKeys?.masterKey ?? Buffer.from(await persistentSecret(options.dataDir, 'sse-master-key'), 'hex').toString('base64'),
    },
    rootUser: options.rootUser ?? 'strata',
    rootPassword: options.rootPassword ?? 'strata-secret-key',
    logger: (service) => createLogger(service, options.logLevel),
    urls: {},
    notes: {},
  };
  const running: RunningService[] = [];
  const stop = async () => {
    for (const s of [...running].reverse()) await s.stop();
    await broker.close();
    await redisCache?.close();
    await stopVacuum?.();
    await sql.close();
  };
  try {
    for (const service of services) {
      const r = await service.start(ctx);
      running.push(r);
      ctx.urls[service.name] = r.url;
    }
  } catch (err) {
    await stop();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return { services: running, urls: ctx.urls, notes: ctx.notes, rootUser: ctx.rootUser, rootPassword: ctx.rootPassword, stop: () => (stopping ??= stop()) };
}
