/**
 * The data plane's cache, shaped after Redis so that a Redis Cluster implementation (ioredis) drops
 * in: strings with TTL, hashes and sets. Multipart upload state lives here. Keys of one upload share
 * a hash tag (`{uploadId}`) so that they land on one cluster shard.
 */
export interface Cache {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlSeconds?: number): Promise<void>;
  /** Answers how many of the keys existed. */
  del(...keys: string[]): Promise<number>;
  hset(key: string, field: string, value: string): Promise<void>;
  hget(key: string, field: string): Promise<string | undefined>;
  hgetall(key: string): Promise<Record<string, string>>;
  hdel(key: string, ...fields: string[]): Promise<void>;
  sadd(key: string, member: string): Promise<void>;
  srem(key: string, member: string): Promise<void>;
  smembers(key: string): Promise<string[]>;
  /** How many members the set has (0 when missing). */
  scard(key: string): Promise<number>;
  expire(key: string, ttlSeconds: number): Promise<void>;
}
