import { z } from 'zod';
import { internalIdleEnv } from '../../object-model/src/index.js';
import { env, productionEnvShape, secretsEnv } from '../../service-kit/src/index.js';
import { DAILY_PURGE_SCHEDULE, DEFAULT_BUCKET_NAME_HOLD_MS } from './app.js';

/** The control plane's environment (the container entrypoint reads nothing else). */
export const controlPlaneEnvSchema = z.object({
  PORT: env.port(9002),
  // STRATA_PG_REPLICA_URLS, STRATA_REDIS_NODES, STRATA_AMQP_URL...: the production adapters (README).
  ...productionEnvShape,
  ...internalIdleEnv,
  /** PostgreSQL primary, libpq URL (required here). */
  STRATA_PG_URL: z.string().min(1, 'the PostgreSQL connection URL is required'),
  STRATA_INTERNAL_TOKEN: secretsEnv.STRATA_INTERNAL_TOKEN,
  STRATA_SECRET_KEY: secretsEnv.STRATA_SECRET_KEY,
  /** The root user, created or updated at start (also its SigV4 access key). */
  STRATA_ROOT_USER: z.string().min(3).optional(),
  /** The root's password (also its SigV4 secret key). */
  STRATA_ROOT_PASSWORD: z.string().min(8).optional(),
  /** The data plane's internal API (backend checks of new buckets). */
  STRATA_DATA_PLANE_URL: z.string().url().optional(),
  // Off by default: under the operator a Kubernetes CronJob calls POST /internal/purge instead.
  STRATA_PURGE_CRON_ENABLED: env.bool(false),
  /** Cron expression of the in-process recycle-bin purge (when enabled). */
  STRATA_PURGE_CRON: z.string().default(DAILY_PURGE_SCHEDULE),
  /** Days an object stays in the recycle bin before the purge deletes it. */
  STRATA_RECYCLE_RETENTION_DAYS: env.int(30, 0, 3650),
  /** How long a deleted bucket's name stays reserved for its owner, ms (default: the gateway's STRATA_BUCKET_CACHE_MS default plus 8 s; raise it with that). */
  STRATA_BUCKET_NAME_HOLD_MS: env.int(DEFAULT_BUCKET_NAME_HOLD_MS, 0, 86_400_000),
  /** Whether buckets may keep their bytes on the data plane's fs backend (false: refused, the operator's replicated data planes). */
  STRATA_FS_BACKEND: env.bool(true),
  LOG_LEVEL: env.logLevel(),
});
