import { applyHeapGrowth, createLogger, loadConfig, productionSettings, stopOnSignals, surviveUncaughtErrors } from '../../service-kit/src/index.js';
import { startDataPlane } from './app.js';
import { dataPlaneEnvSchema } from './config.js';

/** Container entrypoint: configuration from the environment only. */
const config = loadConfig('data-plane', dataPlaneEnvSchema);

applyHeapGrowth();
const logger = createLogger('data-plane', config.LOG_LEVEL);
// A bug that lets an error escape its request is logged and counted (strata_uncaught_errors_total), never an exit.
surviveUncaughtErrors(logger);
// Without STRATA_AMQP_URL the outbox keeps events until a relay with a broker runs.
const service = await startDataPlane({
  ...productionSettings(config),
  port: config.PORT,
  dataDir: config.STRATA_DATA_DIR,
  internalToken: config.STRATA_INTERNAL_TOKEN,
  secretKey: config.STRATA_SECRET_KEY,
  outboxRetryMs: config.STRATA_OUTBOX_RETRY_MS,
  blobSweepMs: config.STRATA_BLOB_SWEEP_MS,
  orphanGraceMs: config.STRATA_ORPHAN_GRACE_MS,
  smallBlobCacheMb: config.STRATA_SMALL_BLOB_CACHE_MB,
  inlineBlobBytes: config.STRATA_INLINE_BLOB_BYTES,
  directIo: config.STRATA_DIRECT_IO,
  multipartUploadsPerAccount: config.STRATA_MULTIPART_UPLOADS_PER_ACCOUNT,
  logger,
});
stopOnSignals([service], logger);
