import { Cluster, type ClusterNode } from 'ioredis';
import { createKeySharder, pickHashTags, slotRangesFromClusterSlots, type KeySharder } from './hash-tags.js';

/**
 * The cache could not answer (down, unreachable, too slow). Where the value is only a cache (bucket
 * lookups), callers treat it as a miss and go to the database ("degrade"); where the state lives
 * only here (multipart uploads), they answer S3 ServiceUnavailable so the client retries.
 */
export class CacheUnavailableError extends Error {
  constructor(
    readonly operation: string,
    cause: unknown,
  ) {
    super(`cache unavailable during ${operation}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'CacheUnavailableError';
  }
}

export interface RedisClusterCacheOptions {
  /** Seed nodes; the client discovers the rest. */
  nodes: ClusterNode[];
  /** The nodes' password (requirepass), sent to every node the client connects to. */
  password?: string;
  /** Prefix of every key (namespaces one test or tenant of a shared cluster). Default none: Strata's keys start with "strata:". */
  keyPrefix?: string;
  /** Upper bound for one call including its retries, in ms. Default 1000. */
  timeoutMs?: number;
  /** Extra attempts after a failed one (connection errors only). Default 1. */
  retries?: number;
  /** Delay between attempts, in ms. Default 50. */
  retryDelayMs?: number;
  /**
   * Replicas each write should reach before it is answered (WAIT on the master's connection): a
   * failover, which promotes a replica, then loses no write that was answered. For state that lives
   * only here (multipart uploads). A master with fewer replicas attached (one is down, or it was just
   * promoted and its old master has not rejoined) waits for those it has, and one whose replicas do not
   * acknowledge in time does not fail the write either: the write is on the master, in its AOF (written
   * before the reply), and is reported through `onUnreplicatedWrite`. Losing it takes a second fault:
   * the master lost before a replica has it. Default 0 (no waiting).
   */
  replicaAcks?: number;
  /** How long a write waits for its replicas, in ms (below timeoutMs). Default half of timeoutMs. */
  replicaAckTimeoutMs?: number;
  /** Called for each write answered with fewer replica acknowledgements than `replicaAcks` (log, metric). */
  onUnreplicatedWrite?: (write: UnreplicatedWrite) => void;
}

/** A write accepted with fewer replica acknowledgements than asked for. */
export interface UnreplicatedWrite {
  operation: string;
  /** Replicas attached to the key's master when it was written, and how many acknowledged it. */
  attached: number;
  acknowledged: number;
}

/** One command of a write: its name, then its arguments, the first being the stored key. */
type WriteCommand = [string, string, ...Array<string | number>];

/** The EXPIRE that goes with a write given a TTL. */
const expiring = (key: string, ttlSeconds: number | undefined): WriteCommand[] => (ttlSeconds && ttlSeconds > 0 ? [['expire', key, ttlSeconds]] : []);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A reply the server gave on purpose (e.g. WRONGTYPE) is a bug to surface, not an outage; replies
 * that mean "the cluster cannot serve right now" count as unavailability.
 */
function isDeliberateReply(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError' && !/^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|BUSY|MOVED|ASK)\b/.test(err.message);
}

/**
 * The string cache every service uses (the control plane's cache is exactly this; the data plane's
 * `Cache` adds hashes and sets, which RedisClusterCache and InMemoryCache also have). Missing and
 * expired keys read alike as undefined.
 */
export interface StringCache {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlSeconds?: number): Promise<void>;
  /** Answers how many of the keys existed. */
  del(...keys: string[]): Promise<number>;
}

/**
 * StringCache and the data plane's `Cache` over a Redis Cluster (ioredis): strings, and the hash and
 * set operations of the data plane's cache (multipart part state), with the same semantics as
 * InMemoryCache (missing or expired reads as undefined / {} / []). Every key carries one of the hash tags that
 * land on distinct masters, so hot keys (bucket lookups, instant-upload lookups, part state) load
 * every master; keys grouped by a tag of their own stay together. Calls fail fast with
 * `CacheUnavailableError` when the cluster is down: no offline queue, bounded retries and a hard
 * deadline per call.
 */
export class RedisClusterCache implements StringCache {
  readonly client: Cluster;
  private sharder: KeySharder = createKeySharder(pickHashTags());
  private tagsFromCluster = false;
  private readonly keyPrefix: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly retryDelayMs: number;
  private readonly replicaAcks: number;
  private readonly replicaAckTimeoutMs: number;
  private readonly onUnreplicatedWrite: (write: UnreplicatedWrite) => void;

  constructor(opts: RedisClusterCacheOptions) {
    this.keyPrefix = opts.keyPrefix ?? '';
    this.timeoutMs = opts.timeoutMs ?? 1000;
    this.replicaAcks = opts.replicaAcks ?? 0;
    this.replicaAckTimeoutMs = opts.replicaAckTimeoutMs ?? Math.max(1, Math.floor(this.timeoutMs / 2));
    this.onUnreplicatedWrite = opts.onUnreplicatedWrite ?? (() => undefined);
    this.retries = opts.retries ?? 1;
    this.retryDelayMs = opts.retryDelayMs ?? 50;
    this.client = new Cluster(opts.nodes, {
      // Queued commands would wait for a cluster that may be gone; failing lets callers degrade.
      enableOfflineQueue: false,
      // Keep trying to (re)connect in the background so the cache comes back on its own.
      clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
      retryDelayOnFailover: 50,
      retryDelayOnClusterDown: 50,
      maxRedirections: 4,
      slotsRefreshTimeout: Math.max(200, this.timeoutMs),
      redisOptions: {
        ...(opts.password ? { password: opts.password } : {}),
        connectTimeout: this.timeoutMs,
        commandTimeout: this.timeoutMs,
        maxRetriesPerRequest: 1,
      },
    });
    // Without a listener an emitted 'error' would crash the process; the errors reach callers anyway.
    this.client.on('error', () => undefined);
  }

  /** The key as stored: prefix, then the tag chosen for the base key. Exposed for tests and tools. */
  storedKey(key: string): string {
    return this.sharder.shardedKey(`${this.keyPrefix}${key}`);
  }

  get tags(): readonly string[] {
    return this.sharder.tags;
  }

  /**
   * Wait until the cluster is ready and take the hash tags from its actual slot layout (the
   * standard split is used until then). Optional: calls work without it.
   */
  async connect(): Promise<void> {
    await this.call(
      'connect',
      async () => {
        if (this.client.status !== 'ready') {
          await new Promise<void>((resolve, reject) => {
            const onReady = () => {
              this.client.off('end', onEnd);
              resolve();
            };
            const onEnd = () => {
              this.client.off('ready', onReady);
              reject(new Error('cluster connection ended'));
            };
            this.client.once('ready', onReady);
            this.client.once('end', onEnd);
          });
        }
        if (!this.tagsFromCluster) {
          const slots = await this.client.cluster('SLOTS');
          this.sharder = createKeySharder(pickHashTags(slotRangesFromClusterSlots(slots)));
          this.tagsFromCluster = true;
        }
      },
      0,
    );
  }

  async get(key: string): Promise<string | undefined> {
    return (await this.call('get', () => this.client.get(this.storedKey(key)))) ?? undefined;
  }

  async set(key: string, value: string, ttlSeconds?: number): Promise<void> {
    await this.write('set', this.storedKey(key), value, ...(ttlSeconds && ttlSeconds > 0 ? ['EX', ttlSeconds] : []));
  }

  /** Answers how many of the keys existed. One DEL per key: the keys may live on different masters. */
  async del(...keys: string[]): Promise<number> {
    if (keys.length === 0) return 0;
    const counts = await Promise.all(keys.map((key) => this.write('del', this.storedKey(key))));
    return counts.reduce((a: number, b) => a + Number(b), 0);
  }

  /** With `ttlSeconds`, the field is written and the hash's TTL set in one transaction (MULTI/EXEC): a lost connection leaves both or neither. */
  async hset(key: string, field: string, value: string, ttlSeconds?: number): Promise<void> {
    const k = this.storedKey(key);
    await this.writeAll('hset', [['hset', k, field, value], ...expiring(k, ttlSeconds)]);
  }

  async hget(key: string, field: string): Promise<string | undefined> {
    return (await this.call('hget', () => this.client.hget(this.storedKey(key), field))) ?? undefined;
  }

  hgetall(key: string): Promise<Record<string, string>> {
    return this.call('hgetall', () => this.client.hgetall(this.storedKey(key)));
  }

  async hdel(key: string, ...fields: string[]): Promise<void> {
    if (fields.length === 0) return;
    await this.write('hdel', this.storedKey(key), ...fields);
  }

  /** With `ttlSeconds`, the member is added and the set's TTL set in one transaction (MULTI/EXEC): a lost connection leaves both or neither. */
  async sadd(key: string, member: string, ttlSeconds?: number): Promise<void> {
    const k = this.storedKey(key);
    await this.writeAll('sadd', [['sadd', k, member], ...expiring(k, ttlSeconds)]);
  }

  async srem(key: string, member: string): Promise<void> {
    await this.write('srem', this.storedKey(key), member);
  }

  smembers(key: string): Promise<string[]> {
    return this.call('smembers', () => this.client.smembers(this.storedKey(key)));
  }

  scard(key: string): Promise<number> {
    return this.call('scard', () => this.client.scard(this.storedKey(key)));
  }

  async expire(key: string, ttlSeconds: number): Promise<void> {
    await this.write('expire', this.storedKey(key), ttlSeconds);
  }

  /** One write command (its first argument is the stored key); see writeAll. */
  private async write(command: string, key: string, ...args: Array<string | number>): Promise<unknown> {
    return (await this.writeAll(command, [[command, key, ...args]]))[0];
  }

  /**
   * Write commands on one key's slot, as one transaction (MULTI/EXEC) when there are several; answers
   * their replies. With `replicaAcks`, the transaction also reads the master's ROLE (its attached
   * replicas), and the write then waits (WAIT) for as many of those as it asks, within
   * replicaAckTimeoutMs. Fewer acknowledgements do not fail it (see RedisClusterCacheOptions.replicaAcks).
   */
  private writeAll(operation: string, commands: WriteCommand[]): Promise<unknown[]> {
    return this.call(operation, async () => {
      if (this.replicaAcks === 0 && commands.length === 1) return [await this.client.call(...commands[0]!)];
      const pipeline = this.client.pipeline().call('MULTI');
      for (const command of commands) pipeline.call(...command);
      if (this.replicaAcks > 0) pipeline.call('ROLE');
      const replies = (await pipeline.call('EXEC').exec()) ?? [];
      for (const [err] of replies) if (err) throw this.redirected(err);
      const results = replies.at(-1)![1] as unknown[];
      for (const result of results) if (result instanceof Error) throw result;
      if (this.replicaAcks === 0) return results;
      const [, , replicas] = results.pop() as [string, number, unknown[]];
      const attached = Array.isArray(replicas) ? replicas.length : 0;
      const wanted = Math.min(this.replicaAcks, attached);
      let acknowledged = 0;
      if (wanted > 0) {
        // WAIT covers every earlier write of this connection; EXISTS routes it to the key's master.
        const waited = (await this.client.pipeline().exists(commands[0]![1]).call('WAIT', wanted, this.replicaAckTimeoutMs).exec()) ?? [];
        for (const [err] of waited) if (err) throw this.redirected(err);
        acknowledged = Number(waited[1]?.[1]);
      }
      if (acknowledged < this.replicaAcks) this.onUnreplicatedWrite({ operation, attached, acknowledged });
      return results;
    });
  }

  /** A pipeline sent to a node that no longer serves the slot: the slot map is refreshed for the retry. */
  private redirected(err: Error): Error {
    if (/^(MOVED|ASK)\b/.test(err.message)) this.client.refreshSlotsCache();
    return err;
  }

  async close(): Promise<void> {
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }

  /** Run one cache operation with bounded retries under a hard deadline; any failure is typed. */
  private async call<T>(operation: string, fn: () => Promise<T>, retries = this.retries): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    const attempts = async (): Promise<T> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await fn();
        } catch (err) {
          if (isDeliberateReply(err) || attempt >= retries || Date.now() + this.retryDelayMs >= deadline) throw err;
          await sleep(this.retryDelayMs);
        }
      }
    };
    try {
      return await Promise.race([attempts(), timeout]);
    } catch (err) {
      if (isDeliberateReply(err)) throw err;
      throw new CacheUnavailableError(operation, err);
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The control plane's cache with outages turned into misses: `get` answers undefined (the caller
 * reads the database) and `set`/`del` do nothing, each reported through `onDegrade` (log, metric).
 * A lost invalidation is bounded by the TTL of what was cached. Other errors pass unchanged.
 */
export function degradeWhenUnavailable(cache: StringCache, onDegrade: (err: CacheUnavailableError) => void): StringCache {
  const absorb = async <T>(call: Promise<T>, fallback: T): Promise<T> => {
    try {
      return await call;
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      onDegrade(err);
      return fallback;
    }
  };
  return {
    get: (key) => absorb(cache.get(key), undefined),
    set: (key, value, ttlSeconds) => absorb(cache.set(key, value, ttlSeconds), undefined),
    del: (...keys) => absorb(cache.del(...keys), 0),
  };
}
