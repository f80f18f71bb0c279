import { applyHeapGrowth, productionSettings } from '../../service-kit/src/index.js';
import { runEntrypoint } from '../../service-kit/src/entrypoint.js';
import { startDataPlane } from './app.js';
import { dataPlaneEnvSchema } from './config.js';

// Without STRATA_AMQP_URL the outbox keeps events until a relay with a broker runs.
await runEntrypoint('data-plane', dataPlaneEnvSchema, (config, logger) => {
  applyHeapGrowth();
  return startDataPlane({
    ...productionSettings(config),
    port: config.PORT,
    dataDir: config.STRATA_DATA_DIR,
    fsBackend: config.STRATA_FS_BACKEND,
    internalToken: config.STRATA_INTERNAL_TOKEN,
    secretKey: config.STRATA_SECRET_KEY,
    outboxRetryMs: config.STRATA_OUTBOX_RETRY_MS,
    blobSweepMs: config.STRATA_BLOB_SWEEP_MS,
    orphanGraceMs: config.STRATA_ORPHAN_GRACE_MS,
    smallBlobCacheMb: config.STRATA_SMALL_BLOB_CACHE_MB,
    inlineBlobBytes: config.STRATA_INLINE_BLOB_BYTES,
    directIo: config.STRATA_DIRECT_IO,
    multipartUploadsPerAccount: config.STRATA_MULTIPART_UPLOADS_PER_ACCOUNT,
    bodyIdleTimeoutMs: config.STRATA_INTERNAL_IDLE_TIMEOUT_MS,
    readerIdleTimeoutMs: config.STRATA_INTERNAL_IDLE_TIMEOUT_MS,
    encryptionKeys: {
      masterKey: config.STRATA_SSE_MASTER_KEY,
      masterKeys: config.STRATA_SSE_MASTER_KEYS,
      kmsKeys: config.STRATA_SSE_KMS_KEYS,
      kmsDefaultKey: config.STRATA_SSE_KMS_DEFAULT_KEY,
    },
    logger,
  });
});
