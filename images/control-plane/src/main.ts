import { z } from 'zod';
import { createLogger, env, loadConfig, productionEnvShape, productionSettings, stopOnSignals, surviveUncaughtErrors } from '../../service-kit/src/index.js';
import { DAILY_PURGE_SCHEDULE, DEFAULT_BUCKET_NAME_HOLD_MS, startControlPlane } from './app.js';

/** Container entrypoint: configuration from the environment only. */
const config = loadConfig(
  'control-plane',
  z.object({
    PORT: env.port(9002),
    // STRATA_PG_REPLICA_URLS, STRATA_REDIS_NODES, STRATA_AMQP_URL...: the production adapters (README).
    ...productionEnvShape,
    STRATA_PG_URL: z.string().min(1, 'the PostgreSQL connection URL is required'),
    STRATA_INTERNAL_TOKEN: z.string().min(16, 'at least 16 characters'),
    STRATA_SECRET_KEY: z.string().min(16, 'at least 16 characters'),
    STRATA_ROOT_USER: z.string().min(3).optional(),
    STRATA_ROOT_PASSWORD: z.string().min(8).optional(),
    STRATA_DATA_PLANE_URL: z.string().url().optional(),
    // Off by default: under the operator a Kubernetes CronJob calls POST /internal/purge instead.
    STRATA_PURGE_CRON_ENABLED: env.bool(false),
    STRATA_PURGE_CRON: z.string().default(DAILY_PURGE_SCHEDULE),
    STRATA_RECYCLE_RETENTION_DAYS: env.int(30, 0, 3650),
    STRATA_BUCKET_NAME_HOLD_MS: env.int(DEFAULT_BUCKET_NAME_HOLD_MS, 0, 86_400_000),
    LOG_LEVEL: env.logLevel(),
  }),
);

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
