import { randomUUID } from 'node:crypto';
import type { StringCache } from '../../service-kit/src/index.js';

/**
 * A read cache of object metadata (GET/HEAD) shared by the data plane (reader and writer) and the
 * control plane (writer: delete, restore) through the cache both already use: in-memory in one
 * process, Redis Cluster in production.
 *
 * Stale entries are never served: every key has a VERSION token, and an entry is valid only while it
 * carries the current token. A writer replaces the token with a fresh random one after its commit and
 * before it answers. A reader that finds no token sets a fresh one BEFORE it reads the database, and
 * stores what it read under the token it saw: if any write committed after that read began, its new
 * token differs and the entry is never used (a read concurrent with a write may store an entry that
 * is dead on arrival, never a live stale one). Tokens are random, so a token that expired or was
 * evicted cannot come back and revive an old entry. Entry and token share a hash tag (one shard).
 *
 * The residual risk is a writer that commits and then cannot set the token (process killed in
 * between, cache unreachable): then an old entry may be served until it expires, so entries are short
 * lived (OBJECT_READ_CACHE_TTL_S).
 */
export const OBJECT_READ_CACHE_TTL_S = 30;

/**
 * The string operations the read cache needs of a service's cache; `getNow`, where the cache is this
 * process's memory, reads what `get` would answer without a promise.
 */
export type ReadCacheStore = Pick<StringCache, 'get' | 'set'> & { getNow?(key: string): string | undefined };

const tag = (bucket: string, key: string) => `{${bucket}/${key}}`;
export const objectReadCacheKeys = {
  version: (bucket: string, key: string) => `strata:objv:${tag(bucket, key)}`,
  entry: (bucket: string, key: string) => `strata:objm:${tag(bucket, key)}`,
};

// randomUUID draws from a cached pool of entropy (randomBytes() called into OpenSSL on every write).
const newToken = () => randomUUID();

/** After a committed write of (bucket, key): entries read before it can no longer be served. */
export async function invalidateObjectRead(cache: ReadCacheStore, bucket: string, key: string): Promise<void> {
  await cache.set(objectReadCacheKeys.version(bucket, key), newToken(), OBJECT_READ_CACHE_TTL_S * 4);
}

/** The current version token of (bucket, key) when the cache can tell it at once (in memory, and set); else undefined. */
export function knownObjectVersion(cache: ReadCacheStore, bucket: string, key: string): string | undefined {
  return cache.getNow?.(objectReadCacheKeys.version(bucket, key));
}

/**
 * The current version token of (bucket, key); a reader that finds none sets a fresh one, BEFORE it
 * reads the object, so that any write committed after this call leaves the token it returns stale.
 */
export async function currentObjectVersion(cache: ReadCacheStore, bucket: string, key: string): Promise<string> {
  const vKey = objectReadCacheKeys.version(bucket, key);
  const version = await cache.get(vKey);
  if (version !== undefined) return version;
  const token = newToken();
  await cache.set(vKey, token, OBJECT_READ_CACHE_TTL_S * 4);
  return token;
}

/**
 * The cached value of (bucket, key), or `load()` (the database), stored for the next reader when
 * `cacheable(value)`.
 */
export async function readThroughObjectCache<T>(
  cache: ReadCacheStore,
  bucket: string,
  key: string,
  load: () => Promise<T>,
  cacheable: (value: T) => boolean,
): Promise<T> {
  const vKey = objectReadCacheKeys.version(bucket, key);
  const eKey = objectReadCacheKeys.entry(bucket, key);
  let token: string;
  try {
    const [version, raw] = await Promise.all([cache.get(vKey), cache.get(eKey)]);
    if (version !== undefined && raw !== undefined) {
      const entry = JSON.parse(raw) as { v: string; value: T };
      if (entry.v === version) return entry.value;
    }
    token = version ?? newToken();
    if (version === undefined) await cache.set(vKey, token, OBJECT_READ_CACHE_TTL_S * 4);
  } catch {
    return load(); // cache unavailable: the database answers
  }
  const value = await load();
  if (cacheable(value)) await cache.set(eKey, JSON.stringify({ v: token, value }), OBJECT_READ_CACHE_TTL_S).catch(() => undefined);
  return value;
}
