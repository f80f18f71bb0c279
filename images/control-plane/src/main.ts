import { createLogger, loadConfig, productionSettings, stopOnSignals, surviveUncaughtErrors } from '../../service-kit/src/index.js';
import { startControlPlane } from './app.js';
import { controlPlaneEnvSchema } from './config.js';

/** Container entrypoint: configuration from the environment only. */
const config = loadConfig('control-plane', controlPlaneEnvSchema);

const logger = createLogger('control-plane', config.LOG_LEVEL);
// A bug that lets an error escape its request is logged and counted (strata_uncaught_errors_total), never an exit.
surviveUncaughtErrors(logger);
const service = await startControlPlane({
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
  logger,
});
stopOnSignals([service], logger);
