import type { Cluster, Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { FlowRules, RateLimitRule } from './rules.js';

/** Where counters live: this process only, or Redis (shared by every gateway replica). */
export type RateLimitStore = { kind: 'memory' } | { kind: 'redis'; client: Redis | Cluster; keyPrefix: string };

export type RateLimitVerdict = { allowed: true } | { allowed: false; scope: 'route' | 'user' | 'address'; userClass: string; retryAfterSeconds: number };

/**
 * The key an anonymous client's address counts under: an IPv4 address (also IPv4-mapped IPv6) as itself,
 * an IPv6 address by its /64, since one host is commonly given a whole /64 and could otherwise take a fresh
 * share with each address of it.
 */
export function addressKey(address: string): string {
  const bare = address.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
  if (mapped) return mapped[1]!;
  if (!bare.includes(':')) return bare;
  const [head = '', tail] = bare.split('::', 2);
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => (Number.parseInt(g, 16) || 0).toString(16))
    .join(':')}::/64`;
}

/** User class of a caller: its class from the rules, "default", or "anonymous" (no user limit). */
export function userClassOf(rules: FlowRules, user: string | undefined): string {
  if (user === undefined) return 'anonymous';
  for (const [name, cls] of Object.entries(rules.rateLimits.users.classes)) if (cls.users.includes(user)) return name;
  return 'default';
}

/**
 * The rate limits of the current rules: one limiter per route rule and per user class. Rebuilt on
 * reload, keeping the limiters whose rule did not change (so their counters survive a reload).
 */
export class RateLimits {
  private rules!: FlowRules;
  private limiters = new Map<string, { rule: string; limiter: RateLimiterAbstract }>();

  constructor(
    private readonly store: RateLimitStore,
    rules: FlowRules,
  ) {
    this.update(rules);
  }

  update(rules: FlowRules): void {
    this.rules = rules;
    const wanted = new Map<string, RateLimitRule>();
    for (const [route, rule] of Object.entries(rules.rateLimits.routes)) wanted.set(`route:${route}`, rule);
    if (rules.rateLimits.users.default) wanted.set('user:default', rules.rateLimits.users.default);
    for (const [name, cls] of Object.entries(rules.rateLimits.users.classes)) wanted.set(`user:${name}`, { points: cls.points, duration: cls.duration });
    if (rules.rateLimits.anonymous) wanted.set('anonymous', rules.rateLimits.anonymous);
    const next = new Map<string, { rule: string; limiter: RateLimiterAbstract }>();
    for (const [id, rule] of wanted) {
      const fingerprint = `${rule.points}/${rule.duration}`;
      const existing = this.limiters.get(id);
      next.set(id, existing?.rule === fingerprint ? existing : { rule: fingerprint, limiter: buildLimiter(this.store, id, rule) });
    }
    this.limiters = next;
  }

  /** Whether any limit counts such a request (when none does, check's verdict is allowed: no need to ask it). */
  applies(route: string, user: string | undefined, address?: string): boolean {
    if (this.limiters.size === 0) return false;
    if (this.limiters.has(`route:${route}`)) return true;
    if (user !== undefined) return this.limiters.has(`user:${userClassOf(this.rules, user)}`);
    return address !== undefined && this.limiters.has('anonymous');
  }

  /**
   * Take one point from the route's limit and the user's, or for an anonymous request (no user) from its
   * client address's; the first that is exhausted rejects.
   */
  async check(route: string, user: string | undefined, address?: string): Promise<RateLimitVerdict> {
    const userClass = userClassOf(this.rules, user);
    const checks: Array<Promise<RateLimitVerdict>> = [];
    const routeLimiter = this.limiters.get(`route:${route}`)?.limiter;
    if (routeLimiter) checks.push(consume(routeLimiter, 'all', 'route', userClass));
    if (user !== undefined) checks.push(this.checkUser(user));
    const anonymous = this.limiters.get('anonymous')?.limiter;
    if (user === undefined && address !== undefined && anonymous) checks.push(consume(anonymous, addressKey(address), 'address', userClass));
    const verdicts = await Promise.all(checks);
    return verdicts.find((v) => !v.allowed) ?? { allowed: true };
  }

  /** Take one point from the user's limit only (for a request whose user is known only after its route's check). */
  async checkUser(user: string): Promise<RateLimitVerdict> {
    const userClass = userClassOf(this.rules, user);
    const limiter = this.limiters.get(`user:${userClass}`)?.limiter;
    return limiter ? consume(limiter, user, 'user', userClass) : { allowed: true };
  }
}

/** A limiter of `rule` in `store`: in Redis with a per-replica fallback, or in memory. */
export function buildLimiter(store: RateLimitStore, id: string, rule: RateLimitRule): RateLimiterAbstract {
  const memory = new RateLimiterMemory({ points: rule.points, duration: rule.duration, keyPrefix: id });
  if (store.kind === 'memory') return memory;
  return new RateLimiterRedis({
    storeClient: store.client,
    keyPrefix: `${store.keyPrefix}${id}`,
    points: rule.points,
    duration: rule.duration,
    // Redis down: answer at once from a per-replica counter instead of waiting for it.
    rejectIfRedisNotReady: true,
    insuranceLimiter: memory,
  });
}

async function consume(limiter: RateLimiterAbstract, key: string, scope: 'route' | 'user' | 'address', userClass: string): Promise<RateLimitVerdict> {
  try {
    await limiter.consume(key);
    return { allowed: true };
  } catch (res) {
    if (res instanceof RateLimiterRes) {
      return { allowed: false, scope, userClass, retryAfterSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
    }
    // A store failure the insurance limiter could not absorb: let the request through (fail open).
    return { allowed: true };
  }
}
