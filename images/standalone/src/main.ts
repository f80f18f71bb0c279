import { applyHeapGrowth, createLogger, logFormat, stopOnSignals, surviveUncaughtErrors, productionSettings } from '../../service-kit/src/index.js';
import { renderBanner } from './banner.js';
import { loadStandaloneEnv } from './config.js';
import { PLATFORM_SERVICES, startPlatform } from './platform.js';

/** `npm start`: the whole platform in one process with embedded defaults. */
const env = loadStandaloneEnv();
applyHeapGrowth();
// In a terminal the banner says what started: log lines are warnings and errors unless LOG_LEVEL asks for more.
const logLevel = !process.env.LOG_LEVEL && logFormat() === 'pretty' ? 'warn' : env.LOG_LEVEL;
const logger = createLogger('standalone', logLevel);
// A bug that lets an error escape its request is logged and counted (strata_uncaught_errors_total), never an exit.
surviveUncaughtErrors(logger);
process.stderr.write('Starting Strata...\n');
const platform = await startPlatform(
  {
    dataDir: env.STRATA_DATA_DIR,
    host: env.STRATA_HOST,
    ports: {
      gateway: env.STRATA_GATEWAY_PORT,
      dataPlane: env.STRATA_DATA_PLANE_PORT,
      controlPlane: env.STRATA_CONTROL_PLANE_PORT,
      modelServer: env.STRATA_MODEL_SERVER_PORT,
      poemApp: env.STRATA_POEM_APP_PORT,
      imageSearch: env.STRATA_IMAGE_SEARCH_PORT,
    },
    rootUser: env.STRATA_ROOT_USER,
    rootPassword: env.STRATA_ROOT_PASSWORD,
    internalToken: env.STRATA_INTERNAL_TOKEN,
    jwtSecret: env.STRATA_JWT_SECRET,
    secretKey: env.STRATA_SECRET_KEY,
    encryptionKeys: {
      masterKey: env.STRATA_SSE_MASTER_KEY,
      masterKeys: env.STRATA_SSE_MASTER_KEYS,
      kmsKeys: env.STRATA_SSE_KMS_KEYS,
      kmsDefaultKey: env.STRATA_SSE_KMS_DEFAULT_KEY,
    },
    jwtExpiresIn: env.STRATA_JWT_EXPIRES_IN,
    publicUrl: env.STRATA_PUBLIC_URL,
    s3Domains: env.STRATA_S3_DOMAINS,
    corsOrigins: env.STRATA_CORS_ORIGINS,
    gatewaySignatureV2: env.STRATA_SIGV2,
    gatewayRulesFile: env.STRATA_GATEWAY_RULES_FILE,
    gatewayAnswerCacheBytes: env.STRATA_GATEWAY_ANSWER_CACHE_BYTES,
    gatewayBodyIdleTimeoutMs: env.STRATA_GATEWAY_BODY_IDLE_TIMEOUT_MS,
    blockPublicAcls: env.STRATA_BLOCK_PUBLIC_ACLS,
    defaultObjectOwnership: env.STRATA_DEFAULT_OBJECT_OWNERSHIP,
    accessLog: { flushMs: env.STRATA_ACCESS_LOG_FLUSH_MS, flushLines: env.STRATA_ACCESS_LOG_FLUSH_LINES, bufferLines: env.STRATA_ACCESS_LOG_BUFFER_LINES },
    inlineBlobBytes: env.STRATA_INLINE_BLOB_BYTES,
    directIo: env.STRATA_DIRECT_IO,
    pgliteFsync: env.STRATA_PGLITE_FSYNC,
    purgeSchedule: env.STRATA_PURGE_SCHEDULE === 'off' ? false : env.STRATA_PURGE_SCHEDULE,
    logLevel,
    // STRATA_PG_URL, STRATA_PG_REPLICA_URLS, STRATA_REDIS_NODES, STRATA_AMQP_URL...: unset = embedded defaults.
    production: productionSettings(env),
    env: process.env,
  },
  PLATFORM_SERVICES.filter((s) => !(env.STRATA_DISABLED_SERVICES as string[]).includes(s.name)),
);

const gatewayUrl = env.STRATA_PUBLIC_URL ?? platform.urls.gateway;
// The banner goes to stderr: on a terminal it follows the readable log lines; piped, stdout stays JSON.
process.stderr.write(
  renderBanner({
    gatewayUrl,
    s3Domains: env.STRATA_S3_DOMAINS,
    rootUser: platform.rootUser,
    rootPassword: platform.rootPassword,
    defaultPassword: !process.env.STRATA_ROOT_PASSWORD,
    dataDir: env.STRATA_DATA_DIR,
    urls: platform.urls,
    notes: platform.notes,
  }),
);
stopOnSignals([{ stop: () => platform.stop() }], logger);
