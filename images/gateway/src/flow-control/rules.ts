import { createHash } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/**
 * The flow-control rules file (YAML or JSON; JSON is YAML too): what the operator mounts as a
 * ConfigMap. Every section is optional; an empty file means "no limits, default breakers".
 *
 * ```yaml
 * rateLimits:
 *   routes:                # all callers of a route together
 *     PutObject: { points: 200, duration: 1 }
 *   users:
 *     default: { points: 50, duration: 1 }     # each user, all routes together
 *     classes:                                  # named groups with their own limit
 *       batch: { points: 5, duration: 1, users: [etl-bot] }
 *   anonymous: { points: 200, duration: 1 }     # each client address without a signature (false: none)
 * concurrency:
 *   routes:
 *     GetObject: 64         # requests in flight at once, per gateway replica
 *   uploadsPerUser: 32      # uploads (PutObject, UploadPart, PostObject) in flight per tenant, per replica
 *   readsPerUser: 32        # streamed reads (GetObject) in flight per tenant, per replica
 *   uploadPool: 384         # uploads in flight, all tenants together: shared fairly (service-kit's fair-pool.ts)
 *   readPool: 384           # streamed reads in flight, all tenants together: shared fairly
 * transfer:                # bodies and answers must move at least this fast (bytes/s over each window)
 *   minBytesPerSecond: 512
 *   windowMs: 20000
 * connections:             # open client connections, per replica (checked when one is accepted)
 *   perAddress: 1000
 *   total: 10000
 * breakers:
 *   default: { timeout: 10000, errorThresholdPercentage: 50, resetTimeout: 1000, volumeThreshold: 10 }
 *   upstreams:
 *     data-plane: { timeout: 60000 }
 * login:                   # POST /login brute-force protection, on by default (these are the defaults)
 *   failuresPerIp: { points: 100, duration: 900 }    # failed logins from one client IP
 *   failuresPerUser: { points: 10, duration: 900 }   # failed logins of one username from one IP; a success clears it
 *   concurrentHashes: 2    # password checks at once, per gateway replica
 *   queuedHashes: 64       # logins waiting for one; more answer 503 SlowDown
 * ```
 */

const rateLimit = z.strictObject({
  /** Requests allowed per `duration`. */
  points: z.number().int().positive(),
  /** Window length in whole seconds (what the Redis store can expire). */
  duration: z.number().int().positive(),
});
export type RateLimitRule = z.infer<typeof rateLimit>;

const userClass = rateLimit.extend({ users: z.array(z.string().min(1)).min(1) });

/**
 * Anonymous requests (public objects' reads) per client address, all routes together: what one user gets by
 * default, so that reads nobody signs are no free flood. The address is the one trusted proxies forwarded
 * (STRATA_TRUST_PROXY), never a client's own claim; IPv6 clients count per /64 (what one host is given).
 */
export const DEFAULT_ANONYMOUS_RATE: RateLimitRule = { points: 200, duration: 1 };

const breaker = z.strictObject({
  /**
   * ms before a call counts as failed; 0 = no timeout (calls whose duration is the client's, like a
   * streamed upload, whose upstream answer comes only after the whole body).
   */
  timeout: z.number().int().min(0),
  /** Failure percentage (over the rolling window) that opens the circuit. */
  errorThresholdPercentage: z.number().min(0).max(100),
  /**
   * ms the circuit stays open before one trial call (half-open): how soon service comes back after the
   * upstream recovers.
   */
  resetTimeout: z.number().int().positive(),
  /** Calls in the rolling window before the circuit may open at all. */
  volumeThreshold: z.number().int().min(0),
});
export type BreakerRule = z.infer<typeof breaker>;

export const DEFAULT_BREAKER: BreakerRule = {
  timeout: 10_000,
  errorThresholdPercentage: 50,
  resetTimeout: 1_000,
  volumeThreshold: 10,
};

export const DEFAULT_LOGIN_LIMITS = {
  failuresPerIp: { points: 100, duration: 900 },
  failuresPerUser: { points: 10, duration: 900 },
  concurrentHashes: 2,
  queuedHashes: 64,
};

const loginLimits = z.strictObject({
  failuresPerIp: rateLimit.default(DEFAULT_LOGIN_LIMITS.failuresPerIp),
  failuresPerUser: rateLimit.default(DEFAULT_LOGIN_LIMITS.failuresPerUser),
  concurrentHashes: z.number().int().positive().default(DEFAULT_LOGIN_LIMITS.concurrentHashes),
  queuedHashes: z.number().int().min(0).default(DEFAULT_LOGIN_LIMITS.queuedHashes),
});
export type LoginLimits = z.infer<typeof loginLimits>;

/**
 * One tenant's uploads (and streamed reads) in flight by default: plenty for any client's parallel
 * parts, and a small part of the pools below, so that a tenant holding slots it does not use (a
 * trickled body, an answer it does not read) takes at most this many.
 */
export const DEFAULT_UPLOADS_PER_USER = 32;
export const DEFAULT_READS_PER_USER = 32;
/**
 * Streamed reads and uploads in flight, all tenants together (per replica). Each holds a connection
 * to the data plane, of which the gateway opens 512 per kind: reads leave room for metadata calls
 * on the same connections.
 */
export const DEFAULT_READ_POOL = 384;
export const DEFAULT_UPLOAD_POOL = 384;

/** Apache mod_reqtimeout's MinRate (500 B/s), over S3's 20 s body timeout. */
export const DEFAULT_TRANSFER = { minBytesPerSecond: 512, windowMs: 20_000 };

/** Well under a default file-descriptor limit of a server (the data plane and database clients need theirs). */
export const DEFAULT_CONNECTIONS = { perAddress: 1000, total: 10_000 };

const concurrencyDefaults = {
  routes: {},
  uploadsPerUser: DEFAULT_UPLOADS_PER_USER,
  readsPerUser: DEFAULT_READS_PER_USER,
  uploadPool: DEFAULT_UPLOAD_POOL,
  readPool: DEFAULT_READ_POOL,
};

export const flowRulesSchema = z.strictObject({
  rateLimits: z
    .strictObject({
      routes: z.record(z.string(), rateLimit).default({}),
      users: z
        .strictObject({
          default: rateLimit.optional(),
          classes: z.record(z.string(), userClass).default({}),
        })
        .default({ classes: {} }),
      /** Per client address, for requests without a signature or token; `false`: no such limit. */
      anonymous: z.union([rateLimit, z.literal(false)]).default(DEFAULT_ANONYMOUS_RATE),
    })
    .default({ routes: {}, users: { classes: {} }, anonymous: DEFAULT_ANONYMOUS_RATE }),
  concurrency: z
    .strictObject({
      routes: z.record(z.string(), z.number().int().positive()).default({}),
      /** Streamed uploads one tenant may have in flight at once (per replica): past it SlowDown. */
      uploadsPerUser: z.number().int().positive().default(DEFAULT_UPLOADS_PER_USER),
      /** Streamed reads (GetObject) one tenant may have in flight at once (per replica): past it SlowDown. */
      readsPerUser: z.number().int().positive().default(DEFAULT_READS_PER_USER),
      /** Uploads in flight, all tenants together, shared fairly between the tenants that want them (service-kit's fair-pool.ts). */
      uploadPool: z.number().int().positive().default(DEFAULT_UPLOAD_POOL),
      /** Streamed reads in flight, all tenants together, shared the same way. */
      readPool: z.number().int().positive().default(DEFAULT_READ_POOL),
    })
    .default(concurrencyDefaults),
  /**
   * The slowest a request body or an answer may move: fewer than minBytesPerSecond × windowMs / 1000
   * bytes in a window while the gateway waits on the client ends the request (400 RequestTimeout for
   * a body; the connection closed for an answer the client does not read). 0 turns it off.
   */
  transfer: z
    .strictObject({
      minBytesPerSecond: z.number().int().min(0).default(DEFAULT_TRANSFER.minBytesPerSecond),
      windowMs: z.number().int().positive().default(DEFAULT_TRANSFER.windowMs),
    })
    .default(DEFAULT_TRANSFER),
  /** Open client connections: per peer address and in all, past which a new one is closed at once. */
  connections: z
    .strictObject({
      perAddress: z.number().int().positive().default(DEFAULT_CONNECTIONS.perAddress),
      total: z.number().int().positive().default(DEFAULT_CONNECTIONS.total),
    })
    .default(DEFAULT_CONNECTIONS),
  breakers: z
    .strictObject({
      default: breaker.default(DEFAULT_BREAKER),
      upstreams: z.record(z.string(), breaker.partial()).default({}),
    })
    .default({ default: DEFAULT_BREAKER, upstreams: {} }),
  login: loginLimits.default(DEFAULT_LOGIN_LIMITS),
});
export type FlowRules = z.infer<typeof flowRulesSchema>;

export class InvalidRulesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidRulesError';
  }
}

/** Parse and validate rules text; throws InvalidRulesError naming every problem. */
export function parseFlowRules(text: string): FlowRules {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new InvalidRulesError(`not YAML/JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const result = flowRulesSchema.safeParse(raw ?? {});
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new InvalidRulesError(problems.join('; '));
  }
  const rules = result.data;
  const seen = new Map<string, string>();
  for (const [name, cls] of Object.entries(rules.rateLimits.users.classes)) {
    for (const user of cls.users) {
      if (seen.has(user)) throw new InvalidRulesError(`user ${user} is in two classes: ${seen.get(user)} and ${name}`);
      seen.set(user, name);
    }
  }
  return rules;
}

export const emptyFlowRules = (): FlowRules => parseFlowRules('{}');

export const contentHash = (text: string | Buffer): string => createHash('sha256').update(text).digest('hex');

/** Breaker settings for one upstream: its overrides over the default. */
export function breakerRuleFor(rules: FlowRules, upstream: string): BreakerRule {
  return { ...rules.breakers.default, ...rules.breakers.upstreams[upstream] };
}
