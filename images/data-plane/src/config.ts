import { z } from 'zod';
import { internalIdleEnv } from '../../object-model/src/index.js';
import { env, productionEnvShape, secretsEnv } from '../../service-kit/src/index.js';
import { DEFAULT_INLINE_BLOB_BYTES } from './app.js';
import { DEFAULT_UPLOADS_PER_ACCOUNT } from './uploads/upload-state.js';

/** The data plane's environment (the container entrypoint reads nothing else). */
export const dataPlaneEnvSchema = z.object({
  PORT: env.port(9001),
  /** Where the filesystem backend keeps object bytes. */
  STRATA_DATA_DIR: z.string().min(1).default('./data'),
  // STRATA_PG_REPLICA_URLS, STRATA_REDIS_NODES, STRATA_AMQP_URL...: the production adapters (README).
  ...productionEnvShape,
  ...internalIdleEnv,
  /** PostgreSQL primary, libpq URL (required here). */
  STRATA_PG_URL: z.string().min(1, 'the PostgreSQL connection URL is required'),
  STRATA_INTERNAL_TOKEN: secretsEnv.STRATA_INTERNAL_TOKEN,
  // Opens the backend secret keys of operator-made buckets (sealed by the control plane with the same key);
  // unset: such buckets answer 503.
  STRATA_SECRET_KEY: secretsEnv.STRATA_SECRET_KEY.optional(),
  // SSE-S3's key-encryption key (base64, 32 bytes); unset: SSE-S3 and SSE-KMS requests are refused (SSE-C works).
  STRATA_SSE_MASTER_KEY: secretsEnv.STRATA_SSE_MASTER_KEY.optional(),
  // Former key-encryption keys, comma-separated base64: objects written under them still read (rotation).
  STRATA_SSE_MASTER_KEYS: z.string().optional(),
  // The built-in KMS's keys for SSE-KMS, `name:base64key,...` (aws:kms with an unknown key id: KMS.NotFoundException).
  STRATA_SSE_KMS_KEYS: z.string().optional(),
  // The KMS key of aws:kms without a key id; default the first of STRATA_SSE_KMS_KEYS.
  STRATA_SSE_KMS_DEFAULT_KEY: z.string().optional(),
  /** How often unconfirmed outbox events are sent again, ms. @tuning */
  STRATA_OUTBOX_RETRY_MS: env.int(5000, 100),
  /** How often unreferenced blob files are swept, ms (0: never). */
  STRATA_BLOB_SWEEP_MS: env.int(600_000, 0),
  // Temp files and unreferenced blob files younger than this may still belong to a live request, ms. @tuning
  STRATA_ORPHAN_GRACE_MS: env.int(3_600_000, 1000),
  // Memory for recently read small blobs (filesystem backend), in MiB; 0 turns it off. @tuning
  STRATA_SMALL_BLOB_CACHE_MB: env.int(16, 0),
  // Bodies up to this many bytes are kept in the database with their blob row instead of a file; 0 = off. @tuning
  STRATA_INLINE_BLOB_BYTES: env.int(DEFAULT_INLINE_BLOB_BYTES, 0, 1024 * 1024),
  // Large bodies written to files with O_DIRECT (past the page cache) where the file system allows it. @tuning
  STRATA_DIRECT_IO: env.bool(true),
  // In-progress multipart uploads one account may have at once (S3 SlowDown past it).
  STRATA_MULTIPART_UPLOADS_PER_ACCOUNT: env.int(DEFAULT_UPLOADS_PER_ACCOUNT, 1),
  /** Whether buckets may keep their bytes on the fs backend (false: fs buckets are refused, the operator's replicated data planes). */
  STRATA_FS_BACKEND: env.bool(true),
  LOG_LEVEL: env.logLevel(),
});
