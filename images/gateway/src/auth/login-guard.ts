import type { RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';
import { S3Error } from '../../../object-model/src/index.js';
import { FairPool } from '../../../service-kit/src/index.js';
import { buildLimiter, type RateLimitStore } from '../flow-control/rate-limits.js';
import type { FlowRules, LoginLimits, RateLimitRule } from '../flow-control/rules.js';

export type LoginVerdict = { allowed: true } | { allowed: false; scope: 'ip' | 'user'; retryAfterSeconds: number };

/** Runs at most `limit` tasks at once; up to `queue` more wait their turn, any further one is refused. */
export class Slots {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  get inUse(): number {
    return this.active;
  }

  async run<T>(limit: number, queue: number, fn: () => Promise<T>): Promise<T> {
    if (this.active < limit) {
      this.active += 1;
    } else {
      if (this.waiting.length >= queue) throw new S3Error('SlowDown', 'Too many logins in progress; please try again shortly.');
      // The slot is handed over by the task that releases it (active stays counted).
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }
}

/**
 * Brute-force protection of POST /login (rate-limiter-flexible's login pattern): failed logins are
 * counted per client IP and per username from that IP; a client past either limit is refused until
 * its window ends, without a password check, and a successful login clears its username+IP count.
 * Password checks (scrypt, on the thread pool that file I/O shares) run a few at a time, so that a
 * flood of logins cannot take the CPU from object traffic; the checks running and queued are shared fairly by
 * client address (half at most for one, its share while others want some), so that a flood from a few
 * addresses, before their failures are counted, does not refuse everyone else's logins. Limits come from the hot-reloaded rules
 * (`login`, on by default: DEFAULT_LOGIN_LIMITS).
 */
export class LoginGuard {
  private readonly limiters = new Map<'ip' | 'user', { rule: string; limiter: RateLimiterAbstract }>();
  private readonly hashes = new Slots();
  /** The running and queued password checks, by client address. */
  private readonly shares = new FairPool(1, 1);

  constructor(
    private readonly store: RateLimitStore,
    private readonly rulesOf: () => FlowRules,
  ) {}

  /** Whether `ip` may try to log in as `username` now. */
  async check(ip: string, username: string): Promise<LoginVerdict> {
    const rules = this.rulesOf().login;
    const [byIp, byUser] = await Promise.all([this.peek('ip', rules, ip), this.peek('user', rules, userKey(ip, username))]);
    const over = (res: RateLimiterRes | null, rule: RateLimitRule) => res !== null && res.consumedPoints >= rule.points;
    const retryAfter = (res: RateLimiterRes) => Math.max(1, Math.ceil(res.msBeforeNext / 1000));
    if (over(byUser, rules.failuresPerUser)) return { allowed: false, scope: 'user', retryAfterSeconds: retryAfter(byUser!) };
    if (over(byIp, rules.failuresPerIp)) return { allowed: false, scope: 'ip', retryAfterSeconds: retryAfter(byIp!) };
    return { allowed: true };
  }

  async failed(ip: string, username: string): Promise<void> {
    const rules = this.rulesOf().login;
    // consume() rejects once a count is past its limit: the count is what matters here.
    await Promise.all([
      this.limiter('ip', rules)
        .consume(ip)
        .catch(() => undefined),
      this.limiter('user', rules)
        .consume(userKey(ip, username))
        .catch(() => undefined),
    ]);
  }

  async succeeded(ip: string, username: string): Promise<void> {
    await this.limiter('user', this.rulesOf().login)
      .delete(userKey(ip, username))
      .catch(() => undefined);
  }

  /** Run a password check of `ip`'s in one of the few hash slots; SlowDown when too many already wait, or `ip` holds its share. */
  async hashing<T>(ip: string, fn: () => Promise<T>): Promise<T> {
    const { concurrentHashes, queuedHashes } = this.rulesOf().login;
    const size = concurrentHashes + queuedHashes;
    this.shares.resize(size, Math.ceil(size / 2));
    const release = this.shares.tryTake(ip);
    if (typeof release === 'string') throw new S3Error('SlowDown', 'Too many logins in progress; please try again shortly.');
    try {
      return await this.hashes.run(concurrentHashes, queuedHashes, fn);
    } finally {
      release();
    }
  }

  /** Password checks running now (metrics, tests). */
  get hashesInFlight(): number {
    return this.hashes.inUse;
  }

  /** A store that cannot answer lets the login through: the password check still runs in its slot. */
  private peek(scope: 'ip' | 'user', rules: LoginLimits, key: string): Promise<RateLimiterRes | null> {
    return this.limiter(scope, rules)
      .get(key)
      .catch(() => null);
  }

  /** The limiter of the current rule; rebuilt (counts lost) only when its rule changes. */
  private limiter(scope: 'ip' | 'user', rules: LoginLimits): RateLimiterAbstract {
    const rule = scope === 'ip' ? rules.failuresPerIp : rules.failuresPerUser;
    const fingerprint = `${rule.points}/${rule.duration}`;
    const existing = this.limiters.get(scope);
    if (existing?.rule === fingerprint) return existing.limiter;
    const limiter = buildLimiter(this.store, `login-failures-${scope}:`, rule);
    this.limiters.set(scope, { rule: fingerprint, limiter });
    return limiter;
  }
}

const userKey = (ip: string, username: string) => `${ip}/${username}`;
