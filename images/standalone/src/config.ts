import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_INLINE_BLOB_BYTES } from '../../data-plane/src/app.js';
import { dataPlaneEnvSchema } from '../../data-plane/src/config.js';
import { gatewayEnvSchema } from '../../gateway/src/config.js';
import { DEFAULT_S3_DOMAINS } from './platform.js';
import { allowedHostsEnv, env, loadConfig, productionEnvShape, secretsEnv } from '../../service-kit/src/index.js';

/** The standalone platform's environment: every value has a development default. */
export const standaloneEnvSchema = z.object({
  /** Where the platform keeps everything: metadata, object bytes, secrets, poems, index state. */
  STRATA_DATA_DIR: z.string().min(1).default('./data'),
  /** Interface every public service listens on: this machine only unless told otherwise (the root password is a development default). */
  STRATA_HOST: z.string().default('127.0.0.1'),
  ...allowedHostsEnv,
  /** S3 gateway port. */
  STRATA_GATEWAY_PORT: env.port(9000),
  /** Data plane port (internal). */
  STRATA_DATA_PLANE_PORT: env.port(9001),
  /** Control plane port (internal). */
  STRATA_CONTROL_PLANE_PORT: env.port(9002),
  /** Model server port. */
  STRATA_MODEL_SERVER_PORT: env.port(8000),
  /** Poem app port. */
  STRATA_POEM_APP_PORT: env.port(3000),
  /** Image search port. */
  STRATA_IMAGE_SEARCH_PORT: env.port(8080),
  /** Comma-separated services not to start, e.g. "image-search,poem-app" (the object store always runs). */
  STRATA_DISABLED_SERVICES: env.list().pipe(z.array(z.enum(['model-server', 'poem-app', 'image-search']))),
  /** The root user (also its SigV4 access key). */
  STRATA_ROOT_USER: z.string().min(1).default('strata'),
  /** The root's password (also its SigV4 secret key); the default is for development only. */
  STRATA_ROOT_PASSWORD: z.string().min(8, 'must be at least 8 characters').default('strata-secret-key'),
  /** Generated per process when unset (the three services share it in-process). */
  STRATA_INTERNAL_TOKEN: secretsEnv.STRATA_INTERNAL_TOKEN.optional(),
  /** Generated once per data dir and kept there when unset, so tokens survive restarts. */
  STRATA_JWT_SECRET: secretsEnv.STRATA_JWT_SECRET.optional(),
  /** Seals users' SigV4 secrets; generated once per data dir when unset (losing it loses the secrets). */
  STRATA_SECRET_KEY: secretsEnv.STRATA_SECRET_KEY.optional(),
  /** SSE-S3's key-encryption key (base64, 32 bytes); generated once per data dir when unset (losing it loses SSE-S3 objects). */
  STRATA_SSE_MASTER_KEY: secretsEnv.STRATA_SSE_MASTER_KEY.optional(),
  STRATA_SSE_MASTER_KEYS: dataPlaneEnvSchema.shape.STRATA_SSE_MASTER_KEYS,
  STRATA_SSE_KMS_KEYS: dataPlaneEnvSchema.shape.STRATA_SSE_KMS_KEYS,
  STRATA_SSE_KMS_DEFAULT_KEY: dataPlaneEnvSchema.shape.STRATA_SSE_KMS_DEFAULT_KEY,
  STRATA_JWT_EXPIRES_IN: gatewayEnvSchema.shape.STRATA_JWT_EXPIRES_IN,
  STRATA_PUBLIC_URL: gatewayEnvSchema.shape.STRATA_PUBLIC_URL,
  /** Domains whose subdomains name buckets (virtual-hosted style), e.g. `<bucket>.localhost`. */
  STRATA_S3_DOMAINS: env.domains(DEFAULT_S3_DOMAINS.join(',')),
  /** Origins of browser pages allowed to call the gateway: the gateway image's setting, parsed the same way. */
  STRATA_CORS_ORIGINS: gatewayEnvSchema.shape.STRATA_CORS_ORIGINS,
  /** Accept AWS Signature Version 2: the gateway image's setting, parsed the same way. */
  STRATA_SIGV2: gatewayEnvSchema.shape.STRATA_SIGV2,
  /** Cron expression of the in-process recycle-bin purge, or "off". */
  STRATA_PURGE_SCHEDULE: z.string().default('0 3 * * *'),
  /** Gateway flow-control rules file (optional; re-read on change). */
  STRATA_GATEWAY_RULES_FILE: z.string().optional(),
  /** Bytes of small-object answers the gateway keeps: the gateway image's setting, parsed the same way. @tuning */
  STRATA_GATEWAY_ANSWER_CACHE_BYTES: gatewayEnvSchema.shape.STRATA_GATEWAY_ANSWER_CACHE_BYTES,
  STRATA_GATEWAY_BODY_IDLE_TIMEOUT_MS: gatewayEnvSchema.shape.STRATA_GATEWAY_BODY_IDLE_TIMEOUT_MS,
  /** Refuse and ignore public ACLs everywhere: the gateway image's setting. */
  STRATA_BLOCK_PUBLIC_ACLS: gatewayEnvSchema.shape.STRATA_BLOCK_PUBLIC_ACLS,
  /** The object ownership of a bucket created without `x-amz-object-ownership`: the gateway image's setting. */
  STRATA_DEFAULT_OBJECT_OWNERSHIP: gatewayEnvSchema.shape.STRATA_DEFAULT_OBJECT_OWNERSHIP,
  /** Server access logging: a target's log lines are written once the first has waited this long, ms (the gateway image's setting). @tuning */
  STRATA_ACCESS_LOG_FLUSH_MS: gatewayEnvSchema.shape.STRATA_ACCESS_LOG_FLUSH_MS,
  STRATA_ACCESS_LOG_FLUSH_LINES: gatewayEnvSchema.shape.STRATA_ACCESS_LOG_FLUSH_LINES,
  STRATA_ACCESS_LOG_BUFFER_LINES: gatewayEnvSchema.shape.STRATA_ACCESS_LOG_BUFFER_LINES,
  /** Bodies up to this many bytes are kept in the database instead of files (the data plane image's setting). @tuning */
  STRATA_INLINE_BLOB_BYTES: env.int(DEFAULT_INLINE_BLOB_BYTES, 0, 1024 * 1024),
  /** Large bodies written with O_DIRECT where the file system allows it (the data plane image's setting). @tuning */
  STRATA_DIRECT_IO: env.bool(true),
  /** The embedded database's commits and checkpoints synced to disk (PGlite's own fsyncs are no-ops). */
  STRATA_PGLITE_FSYNC: env.bool(true),
  LOG_LEVEL: env.logLevel(),
  /**
   * The object store's production servers, each replacing its embedded default when set:
   * STRATA_PG_URL (+ STRATA_PG_REPLICA_URLS), STRATA_REDIS_NODES, STRATA_AMQP_URL, ... (hack/docs/production-servers.md).
   */
  ...productionEnvShape,
});

export type StandaloneEnv = z.infer<typeof standaloneEnvSchema>;

export function loadStandaloneEnv(source: NodeJS.ProcessEnv = process.env): StandaloneEnv {
  const parsed = loadConfig('standalone', standaloneEnvSchema, source);
  return { ...parsed, STRATA_DATA_DIR: path.resolve(parsed.STRATA_DATA_DIR) };
}
