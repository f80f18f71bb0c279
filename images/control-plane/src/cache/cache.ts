/**
 * The control plane's cache: string values with an optional time to live. The in-memory
 * implementation serves one process; a Redis Cluster implementation (ioredis) comes with the
 * production adapters and must keep these semantics (missing and expired read alike as undefined).
 */
export interface Cache {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlSeconds?: number): Promise<void>;
  /** Answers how many of the keys existed. */
  del(...keys: string[]): Promise<number>;
}

/** Cache keys, in one place so that writers and invalidators agree. */
export const cacheKeys = {
  bucket: (name: string) => `strata:bucket:{${name}}`,
};
