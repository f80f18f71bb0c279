import type http from 'node:http';
import type { Cluster, Redis } from 'ioredis';
import { type ChainHandler, type Logger, type Next, type Registry } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import { Breakers } from './breakers.js';
import { ConcurrencyLimits } from './concurrency.js';
import { flowMetrics } from './metrics.js';
import { addressKey, RateLimits } from './rate-limits.js';
import { renderS3ErrorXml, type RenderRejection } from './render.js';
import { emptyFlowRules, type FlowRules } from './rules.js';
import { watchRules, type ReloadOutcome, type RulesWatcher } from './rules-watcher.js';

/** A tenant as metrics name it: the account name (operator-controlled, so few), or "anonymous". */
export const tenantLabel = (user: string | undefined): string => user ?? 'anonymous';

export interface FlowControlOptions {
  /** Rules file (YAML/JSON), re-read on change. Without it, `rules` (or no limits) apply for good. */
  rulesFile?: string;
  rules?: FlowRules;
  logger: Logger;
  registry: Registry;
  /** Low-cardinality route name of a request (e.g. the S3 operation). */
  routeOf: (req: http.IncomingMessage, res: http.ServerResponse) => string;
  /** The authenticated user, or undefined for anonymous requests (no per-user limit). */
  userOf: (req: http.IncomingMessage, res: http.ServerResponse) => string | undefined;
  /** The client's address (behind trusted proxies, the one they forwarded): anonymous callers are limited and share by it. Default: the peer's. */
  clientAddressOf?: (req: http.IncomingMessage) => string;
  /** Share rate-limit counters between gateway replicas through this Redis (or Redis Cluster). */
  redis?: Redis | Cluster;
  /** Prefix of the Redis keys of the counters. Default "strata:flow:". */
  redisKeyPrefix?: string;
  /** Default: a minimal S3 XML error document. */
  render?: RenderRejection;
  /** Watcher tuning (tests). */
  debounceMs?: number;
  pollMs?: number;
}

export interface FlowControl {
  /** Rate and concurrency limits; mount after authentication (it needs the user). */
  middleware: ChainHandler;
  /**
   * Count a request whose caller becomes known only inside its handler (a form upload authenticates by
   * its signed policy, after this middleware ran without a user) against that user's rate limit.
   * Throws SlowDown, with Retry-After set on `res`, when the limit is exhausted.
   */
  admitUser(res: http.ServerResponse, route: string, user: string): Promise<void>;
  /** Call `fn` through the circuit breaker of upstream `name`. */
  wrap<A extends unknown[], R>(name: string, fn: (...args: A) => Promise<R>): (...args: A) => Promise<R>;
  /** Call `fn` once through the circuit breaker of upstream `name` (of its `scope`, e.g. a bucket, when given). */
  run<R>(name: string, fn: () => Promise<R>, scope?: string): Promise<R>;
  /** Count a refusal (or a cut) of `tenant`'s (tenantLabel) by `reason` in strata_gateway_tenant_rejections_total. */
  countRejection(tenant: string, reason: string): void;
  breakers: Breakers;
  rules(): FlowRules;
  /** Re-read the rules file now; normally the directory watch does it. */
  reload(): Promise<ReloadOutcome>;
  close(): void;
}

/**
 * The gateway's flow control: per-route and per-user rate limits (rate-limiter-flexible, in memory
 * or shared through Redis), per-route concurrency limits and circuit breakers per upstream, all
 * from one rules file that is reloaded on change. Rejections are S3 `SlowDown` (503) with
 * `Retry-After`, which S3 clients answer by backing off.
 */
export async function flowControl(opts: FlowControlOptions): Promise<FlowControl> {
  const { logger, registry, routeOf, userOf } = opts;
  const clientAddressOf = opts.clientAddressOf ?? ((req: http.IncomingMessage) => req.socket?.remoteAddress ?? '');
  const render = opts.render ?? renderS3ErrorXml;
  const metrics = flowMetrics(registry);

  let watcher: RulesWatcher | undefined;
  let apply: (rules: FlowRules) => void = () => undefined;
  if (opts.rulesFile) {
    watcher = await watchRules({
      file: opts.rulesFile,
      logger,
      onChange: (rules) => apply(rules),
      onReload: (outcome) => metrics.ruleReloads.inc({ outcome }),
      debounceMs: opts.debounceMs,
      pollMs: opts.pollMs,
    });
  }
  const initial = watcher?.current() ?? opts.rules ?? emptyFlowRules();

  const rateLimits = new RateLimits(
    opts.redis ? { kind: 'redis', client: opts.redis, keyPrefix: opts.redisKeyPrefix ?? 'strata:flow:' } : { kind: 'memory' },
    initial,
  );
  const concurrency = new ConcurrencyLimits(initial, (route, count) => metrics.inFlight.set({ route }, count));
  const breakers = new Breakers(initial, metrics, logger);
  apply = (rules) => {
    rateLimits.update(rules);
    concurrency.update(rules);
    breakers.update(rules);
  };

  const countRejection = (tenant: string, reason: string) => metrics.tenantRejections.inc({ tenant, reason });
  const reject = (req: http.IncomingMessage, res: http.ServerResponse, next: Next, retryAfterSeconds: number, message: string) => {
    res.setHeader('Retry-After', String(retryAfterSeconds));
    render(new S3Error('SlowDown', message), req, res, next);
  };

  /** Past the rate limits: a concurrency slot (released when the answer ends or the client goes away), or SlowDown. */
  const admit = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    next: Next,
    route: string,
    user: string | undefined,
    anonymousKey: string | undefined,
  ) => {
    // Anonymous callers share by address: one cannot take another's share.
    const release = concurrency.tryAcquire(route, user ?? `anonymous@${addressKey(anonymousKey ?? '')}`);
    if (typeof release !== 'function') {
      metrics.concurrencyRejections.inc({ route });
      countRejection(tenantLabel(user), release.scope === 'route' ? 'route-concurrency' : `${release.scope}-${release.reason}`);
      reject(req, res, next, 1, 'Too many requests in progress; please reduce your request rate.');
      return;
    }
    // 'close' also fires when the client goes away before the answer is complete. (The release is idempotent,
    // and each event comes at most once: `on` spares the wrapper `once` makes per request.)
    res.on('finish', release);
    res.on('close', release);
    next();
  };

  const middleware: ChainHandler = (req, res, next) => {
    const route = routeOf(req, res);
    const user = userOf(req, res);
    // Anonymous callers (public buckets) count by address: against the anonymous rate and in shares below.
    const anonymousKey = user === undefined ? clientAddressOf(req) : undefined;
    // No rate limit counts this request (no rules for its route or user): admitted now, no promise made.
    if (!rateLimits.applies(route, user, anonymousKey)) return admit(req, res, next, route, user, anonymousKey);
    rateLimits
      .check(route, user, anonymousKey)
      .then((verdict) => {
        if (!verdict.allowed) {
          metrics.rateLimitRejections.inc({ route, user_class: verdict.userClass, scope: verdict.scope });
          countRejection(tenantLabel(user), 'rate-limit');
          reject(req, res, next, verdict.retryAfterSeconds, 'Please reduce your request rate.');
          return;
        }
        admit(req, res, next, route, user, anonymousKey);
      })
      .catch(next);
  };

  const admitUser = async (res: http.ServerResponse, route: string, user: string): Promise<void> => {
    const verdict = await rateLimits.checkUser(user);
    if (verdict.allowed) return;
    metrics.rateLimitRejections.inc({ route, user_class: verdict.userClass, scope: verdict.scope });
    countRejection(tenantLabel(user), 'rate-limit');
    res.setHeader('Retry-After', String(verdict.retryAfterSeconds));
    throw new S3Error('SlowDown', 'Please reduce your request rate.');
  };

  return {
    middleware,
    admitUser,
    wrap: (name, fn) => breakers.wrap(name, fn),
    run: (name, fn, scope) => breakers.run(name, fn, scope),
    countRejection,
    breakers,
    rules: () => watcher?.current() ?? initial,
    reload: () => (watcher ? watcher.reload() : Promise.resolve('unchanged' as const)),
    close: () => {
      watcher?.close();
      breakers.close();
    },
  };
}
