import { productionSettings } from '../../service-kit/src/index.js';
import { runEntrypoint } from '../../service-kit/src/entrypoint.js';
import { startControlPlane } from './app.js';
import { controlPlaneEnvSchema } from './config.js';

await runEntrypoint('control-plane', controlPlaneEnvSchema, (config, logger) =>
  startControlPlane({
    ...productionSettings(config),
    port: config.PORT,
    internalToken: config.STRATA_INTERNAL_TOKEN,
    secretKey: config.STRATA_SECRET_KEY,
    rootUser: config.STRATA_ROOT_USER,
    rootPassword: config.STRATA_ROOT_PASSWORD,
    dataPlaneUrl: config.STRATA_DATA_PLANE_URL,
    purgeSchedule: config.STRATA_PURGE_CRON_ENABLED ? config.STRATA_PURGE_CRON : false,
    retentionDays: config.STRATA_RECYCLE_RETENTION_DAYS,
    bucketNameHoldMs: config.STRATA_BUCKET_NAME_HOLD_MS,
    fsBackend: config.STRATA_FS_BACKEND,
    bodyIdleTimeoutMs: config.STRATA_INTERNAL_IDLE_TIMEOUT_MS,
    readerIdleTimeoutMs: config.STRATA_INTERNAL_IDLE_TIMEOUT_MS,
    logger,
  }),
);
