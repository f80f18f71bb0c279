import { z } from 'zod';
import { env, loadConfig, productionEnvShape, secretsEnv, trustProxyEnv } from '../../service-kit/src/index.js';
import { BUCKET_CACHE_MS } from '../../object-model/src/bucket-resolution.js';
import { OBJECT_OWNERSHIPS, type ObjectOwnership } from '../../object-model/src/access-control.js';
import { DEFAULT_ACCESS_LOG_SETTINGS } from './access-log/delivery.js';

/** `*`, `none`, or comma-separated origins (`https://app.example.com`); `none` becomes an empty list. */
export function corsOrigins() {
  return z
    .string()
    .default('*')
    .transform((v) =>
      v.trim() === 'none'
        ? []
        : v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^(\*|https?:\/\/[^/\s]+)$/, 'origins like https://app.example.com (scheme and host, no path), `*` or `none`')));
}

/** The gateway's environment. Secrets (internal token, JWT secret) have no defaults. */
export const gatewayEnvSchema = z.object({
  /** TCP port to listen on. */
  STRATA_GATEWAY_PORT: env.port(9000),
  /** Interface to listen on. */
  STRATA_GATEWAY_HOST: z.string().default('0.0.0.0'),
  /** The control plane's internal API. */
  STRATA_CONTROL_PLANE_URL: z.string().url().default('http://127.0.0.1:9002'),
  /** The data plane's internal API. */
  STRATA_DATA_PLANE_URL: z.string().url().default('http://127.0.0.1:9001'),
  STRATA_INTERNAL_TOKEN: secretsEnv.STRATA_INTERNAL_TOKEN,
  STRATA_JWT_SECRET: secretsEnv.STRATA_JWT_SECRET,
  /** Lifetime of the tokens POST /login issues (seconds, or e.g. 15m, 1h, 7d). */
  STRATA_JWT_EXPIRES_IN: z
    .string()
    .regex(/^\d+[smhd]?$/, 'a number of seconds or e.g. 15m, 1h, 7d')
    .default('1h'),
  /** The URL clients reach the gateway at (presigned redirects point there; unset: the request's host). */
  STRATA_PUBLIC_URL: z.string().url().optional(),
  /** Domains under which `<bucket>.<domain>` hosts are virtual-hosted-style requests (comma-separated; unset: path style only). */
  STRATA_S3_DOMAINS: env.domains(),
  /** Origins of browser pages allowed to call the gateway (comma-separated; `*`: any; `none`: cross-origin calls off). */
  STRATA_CORS_ORIGINS: corsOrigins(),
  /** The user the gateway treats as root (the control plane's STRATA_ROOT_USER; its requests pass every check). */
  STRATA_ROOT_USER: z.string().min(1).default('strata'),
  /** The region SigV4 signatures must name. */
  STRATA_REGION: z.string().default('us-east-1'),
  /** Accept AWS Signature Version 2 (headers, presigned URLs, POST forms); `false`: every SigV2 request is 403 AccessDenied. Chart: `platform.s3.signatureV2`. */
  STRATA_SIGV2: env.bool(true),
  ...trustProxyEnv,
  /** Lifetime of the presigned URL a Bearer GET is redirected to, s. */
  STRATA_REDIRECT_EXPIRES_SECONDS: env.int(300, 1, 7 * 24 * 3600),
  /** How long a user's credentials are cached, ms. @tuning */
  STRATA_CREDENTIALS_CACHE_MS: env.int(10_000, 0),
  /** How long a bucket's owner and settings are cached, ms: the one lifetime of a resolved bucket (hack/adr/0007); the control plane's STRATA_BUCKET_NAME_HOLD_MS must outlast it. @tuning */
  STRATA_BUCKET_CACHE_MS: env.int(BUCKET_CACHE_MS, 0),
  /** Bytes of small-object answers the gateway keeps (unset: 8 MiB; 0 turns the answers off). @tuning */
  STRATA_GATEWAY_ANSWER_CACHE_BYTES: z.coerce.number().int().min(0).optional(),
  /** A request body silent this long is answered 400 RequestTimeout, ms (S3's 20 s; 0: off). */
  STRATA_GATEWAY_BODY_IDLE_TIMEOUT_MS: env.int(20_000, 0),
  /**
   * Platform public access block: refuse public ACLs (AllUsers / AuthenticatedUsers grants) with 403 and
   * ignore the public grants objects and buckets already have. Default off: a bucket has ACLs off until its
   * owner turns them on (ownership controls), which already keeps data private by default. Chart:
   * `platform.s3.blockPublicAcls`.
   */
  STRATA_BLOCK_PUBLIC_ACLS: env.bool(false),
  /**
   * The object ownership of a bucket created without `x-amz-object-ownership`: BucketOwnerEnforced (S3's default
   * since 2023: ACLs off), or BucketOwnerPreferred / ObjectWriter (ACLs on, as MinIO and radosgw users expect, so
   * that `aws s3 cp --acl public-read` works on a fresh bucket). The header still wins. Chart:
   * `platform.s3.defaultObjectOwnership`.
   */
  STRATA_DEFAULT_OBJECT_OWNERSHIP: z
    .enum(OBJECT_OWNERSHIPS as [string, ...string[]], { message: `one of ${OBJECT_OWNERSHIPS.join(', ')}` })
    .default('BucketOwnerEnforced')
    .transform((v) => v as ObjectOwnership),
  /** Server access logging: a target's log lines are written once the first of them has waited this long, ms (and on shutdown). @tuning */
  STRATA_ACCESS_LOG_FLUSH_MS: env.int(DEFAULT_ACCESS_LOG_SETTINGS.flushMs, 100),
  /** Server access logging: a target's log lines are written as soon as this many wait. @tuning */
  STRATA_ACCESS_LOG_FLUSH_LINES: env.int(DEFAULT_ACCESS_LOG_SETTINGS.flushLines, 1, 1_000_000),
  /** Server access logging: the most lines held in memory, all targets together; more are dropped and counted (strata_gateway_access_log_lines_total). @tuning */
  STRATA_ACCESS_LOG_BUFFER_LINES: env.int(DEFAULT_ACCESS_LOG_SETTINGS.bufferLines, 1, 10_000_000),
  /** Flow-control rules (YAML/JSON; a ConfigMap mount), re-read on change. Unset: the rules' defaults (hack/docs/edge-limits.md), the anonymous rate per client address among them. */
  STRATA_GATEWAY_RULES_FILE: z.string().optional(),
  /** Same as STRATA_GATEWAY_RULES_FILE (the name the flow-control module documents). */
  STRATA_FLOW_RULES_FILE: z.string().optional(),
  /** Redis Cluster seed nodes (comma-separated host:port): rate-limit counters shared by the replicas. */
  STRATA_REDIS_NODES: productionEnvShape.STRATA_REDIS_NODES,
  STRATA_REDIS_PASSWORD: productionEnvShape.STRATA_REDIS_PASSWORD,
  STRATA_REDIS_KEY_PREFIX: productionEnvShape.STRATA_REDIS_KEY_PREFIX,
  LOG_LEVEL: env.logLevel(),
});

export type GatewayEnv = z.infer<typeof gatewayEnvSchema>;

export function loadGatewayEnv(source: NodeJS.ProcessEnv = process.env): GatewayEnv {
  return loadConfig('gateway', gatewayEnvSchema, source);
}
