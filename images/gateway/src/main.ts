import { applyHeapGrowth, createLogger, createProductionCache, stopOnSignals, surviveUncaughtErrors } from '../../service-kit/src/index.js';
import { startGateway } from './app.js';
import { loadGatewayEnv } from './config.js';

/** Container entrypoint: configuration from env, then serve until SIGTERM. */
const env = loadGatewayEnv();
applyHeapGrowth();
const logger = createLogger('gateway', env.LOG_LEVEL);
// A bug that lets an error escape its request is logged and counted (strata_uncaught_errors_total), never an exit.
surviveUncaughtErrors(logger);
// The Redis Cluster that holds the data plane's object read cache (same nodes and key prefix): with it
// the gateway answers repeated small GETs itself, validated by the objects' version tokens there.
const objectReadCache = createProductionCache(
  { redisNodes: env.STRATA_REDIS_NODES, redisPassword: env.STRATA_REDIS_PASSWORD, redisKeyPrefix: env.STRATA_REDIS_KEY_PREFIX },
  logger,
);
const gateway = await startGateway({
  port: env.STRATA_GATEWAY_PORT,
  host: env.STRATA_GATEWAY_HOST,
  controlPlaneUrl: env.STRATA_CONTROL_PLANE_URL,
  dataPlaneUrl: env.STRATA_DATA_PLANE_URL,
  internalToken: env.STRATA_INTERNAL_TOKEN,
  jwtSecret: env.STRATA_JWT_SECRET,
  jwtExpiresIn: env.STRATA_JWT_EXPIRES_IN,
  publicUrl: env.STRATA_PUBLIC_URL,
  virtualHostDomains: env.STRATA_S3_DOMAINS,
  corsOrigins: env.STRATA_CORS_ORIGINS,
  rootUser: env.STRATA_ROOT_USER,
  region: env.STRATA_REGION,
  signatureV2: env.STRATA_SIGV2,
  redirectExpiresSeconds: env.STRATA_REDIRECT_EXPIRES_SECONDS,
  credentialsCacheMs: env.STRATA_CREDENTIALS_CACHE_MS,
  bucketCacheMs: env.STRATA_BUCKET_CACHE_MS,
  flowRulesFile: env.STRATA_GATEWAY_RULES_FILE ?? env.STRATA_FLOW_RULES_FILE,
  redisNodes: env.STRATA_REDIS_NODES,
  redisPassword: env.STRATA_REDIS_PASSWORD,
  redisKeyPrefix: env.STRATA_REDIS_KEY_PREFIX ? `${env.STRATA_REDIS_KEY_PREFIX}strata:flow:` : undefined,
  objectReadCache,
  objectAnswerCacheBytes: env.STRATA_GATEWAY_ANSWER_CACHE_BYTES,
  bodyIdleTimeoutMs: env.STRATA_GATEWAY_BODY_IDLE_TIMEOUT_MS,
  trustProxy: env.STRATA_TRUST_PROXY,
  blockPublicAcls: env.STRATA_BLOCK_PUBLIC_ACLS,
  defaultObjectOwnership: env.STRATA_DEFAULT_OBJECT_OWNERSHIP,
  accessLog: { flushMs: env.STRATA_ACCESS_LOG_FLUSH_MS, flushLines: env.STRATA_ACCESS_LOG_FLUSH_LINES, bufferLines: env.STRATA_ACCESS_LOG_BUFFER_LINES },
  logger,
});
// Stopped in reverse order: the gateway (in-flight requests) first, then the cache connection.
stopOnSignals([{ stop: async () => objectReadCache?.close() }, gateway], logger);
