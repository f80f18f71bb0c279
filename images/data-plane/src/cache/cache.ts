import type { StringCache } from '../../../service-kit/src/index.js';

/**
 * The data plane's cache, shaped after Redis: the kit's strings with TTL, and hashes and sets (the
 * kit's RedisClusterCache and InMemoryCache have both). Multipart upload state lives here. Keys of
 * one upload share a hash tag (`{uploadId}`) so that they land on one cluster shard.
 */
export interface Cache extends StringCache {
  /** With `ttlSeconds`, the field is written and the hash's TTL set at once: both or neither. */
  hset(key: string, field: string, value: string, ttlSeconds?: number): Promise<void>;
  hget(key: string, field: string): Promise<string | undefined>;
  hgetall(key: string): Promise<Record<string, string>>;
  hdel(key: string, ...fields: string[]): Promise<void>;
  /** With `ttlSeconds`, the member is added and the set's TTL set at once: both or neither. */
  sadd(key: string, member: string, ttlSeconds?: number): Promise<void>;
  srem(key: string, member: string): Promise<void>;
  smembers(key: string): Promise<string[]>;
  /** How many members the set has (0 when missing). */
  scard(key: string): Promise<number>;
  expire(key: string, ttlSeconds: number): Promise<void>;
}
