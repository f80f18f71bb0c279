import type { StringCache } from './redis-cluster-cache.js';

type Value = string | Map<string, string> | Set<string>;

/**
 * A per-process cache with Redis-like semantics and lazy expiry: the StringCache every service uses,
 * and the hashes and sets of the data plane's cache (as RedisClusterCache), so one instance can
 * serve every service in one process.
 */
export class InMemoryCache implements StringCache {
  private readonly entries = new Map<string, { value: Value; expiresAt: number }>();
  private nextSweep = 0;

  constructor(private readonly now: () => number = Date.now) {}

  private live(key: string) {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  private container<T extends Map<string, string> | Set<string>>(key: string, make: () => T): T {
    const entry = this.live(key);
    if (entry) return entry.value as T;
    const value = make();
    this.entries.set(key, { value, expiresAt: Infinity });
    return value;
  }

  async get(key: string): Promise<string | undefined> {
    return this.getNow(key);
  }

  /** What `get` answers, without a promise (hot readers in this process). */
  getNow(key: string): string | undefined {
    const v = this.live(key)?.value;
    return typeof v === 'string' ? v : undefined;
  }

  async set(key: string, value: string, ttlSeconds?: number): Promise<void> {
    const now = this.now();
    this.entries.set(key, { value, expiresAt: ttlSeconds ? now + ttlSeconds * 1000 : Infinity });
    // Expiry is lazy: keys never read again (the object read cache's) are swept at most every 10 s.
    if (ttlSeconds && now >= this.nextSweep) {
      this.nextSweep = now + 10_000;
      for (const [k, e] of this.entries) if (e.expiresAt <= now) this.entries.delete(k);
    }
  }

  async del(...keys: string[]): Promise<number> {
    let n = 0;
    for (const key of keys) if (this.live(key) && this.entries.delete(key)) n++;
    return n;
  }

  async hset(key: string, field: string, value: string, ttlSeconds?: number): Promise<void> {
    this.container(key, () => new Map<string, string>()).set(field, value);
    if (ttlSeconds) await this.expire(key, ttlSeconds);
  }

  async hget(key: string, field: string): Promise<string | undefined> {
    const v = this.live(key)?.value;
    return v instanceof Map ? v.get(field) : undefined;
  }

  async hgetall(key: string): Promise<Record<string, string>> {
    const v = this.live(key)?.value;
    return v instanceof Map ? Object.fromEntries(v) : {};
  }

  async hdel(key: string, ...fields: string[]): Promise<void> {
    const v = this.live(key)?.value;
    if (v instanceof Map) for (const f of fields) v.delete(f);
  }

  async sadd(key: string, member: string, ttlSeconds?: number): Promise<void> {
    this.container(key, () => new Set<string>()).add(member);
    if (ttlSeconds) await this.expire(key, ttlSeconds);
  }

  async srem(key: string, member: string): Promise<void> {
    const v = this.live(key)?.value;
    if (v instanceof Set) v.delete(member);
  }

  async smembers(key: string): Promise<string[]> {
    const v = this.live(key)?.value;
    return v instanceof Set ? [...v] : [];
  }

  async scard(key: string): Promise<number> {
    const v = this.live(key)?.value;
    return v instanceof Set ? v.size : 0;
  }

  async expire(key: string, ttlSeconds: number): Promise<void> {
    const entry = this.live(key);
    if (entry) entry.expiresAt = this.now() + ttlSeconds * 1000;
  }
}
