import type { ClusterNode } from 'ioredis';
import { z } from 'zod';
import { env } from './config.js';
import type { Logger } from './logger.js';
import { Counter, type Registry } from './metrics.js';
import { CacheUnavailableError, RedisClusterCache, type RedisClusterCacheOptions, type StringCache } from './redis-cluster-cache.js';
import { createPgRoutingSqlClient, parseReplicaUrls, type RoutingSqlClientOptions } from './sql-routing.js';
import { createPgSqlClient, PG_TIMEOUT_DEFAULTS, type PgTimeouts, type SqlClient } from './sql.js';

/**
 * The env variables that select the object store's production adapters, shared by the service
 * entrypoints and the standalone platform (spread into their zod schemas). Unset = the embedded or
 * in-memory default of whoever reads them.
 */
export const productionEnvShape = {
  /** PostgreSQL primary, libpq URL: writes, and reads that must be fresh. */
  STRATA_PG_URL: z.string().min(1).optional(),
  /** Hot standbys of that primary (comma-separated URLs, one server each): other reads. */
  STRATA_PG_REPLICA_URLS: env.list(),
  /** Connections per pool (primary and each replica). */
  STRATA_PG_POOL_MAX: env.int(10, 1, 1000),
  /** ms to get a connection (new, or free from a full pool) before the request is answered 503. 0: no limit. */
  STRATA_PG_CONNECT_TIMEOUT_MS: env.int(PG_TIMEOUT_DEFAULTS.connectTimeoutMs, 0, 600_000),
  /** ms a statement may run on the server (statement_timeout; migrations excepted). 0: no limit. */
  STRATA_PG_STATEMENT_TIMEOUT_MS: env.int(PG_TIMEOUT_DEFAULTS.statementTimeoutMs, 0, 3_600_000),
  /** ms the client waits for a statement's answer (a frozen server): past it 503. 0: no limit. */
  STRATA_PG_QUERY_TIMEOUT_MS: env.int(PG_TIMEOUT_DEFAULTS.queryTimeoutMs, 0, 3_600_000),
  /**
   * How replica reads stay fresh: `session` (a read covers the writes of this process's client;
   * right when one client serves every writer, as in the standalone platform) or `latest` (a read
   * covers every commit made anywhere before it; right for separate service processes).
   */
  STRATA_PG_READ_CONSISTENCY: z.enum(['session', 'latest']).optional(),
  /** How long a read may wait for a replica to catch up before going to the primary, ms. @tuning */
  STRATA_PG_REPLICA_WAIT_MS: env.int(10, 0, 10_000),
  /** Redis Cluster seed nodes, comma-separated `host:port`. */
  STRATA_REDIS_NODES: env.list(),
  /** Password of the Redis Cluster's nodes (their requirepass; the operator generates one per stack). Unset: none. */
  STRATA_REDIS_PASSWORD: z.string().min(1).optional(),
  /** Prefix of every cache key (several installations or test runs on one cluster). */
  STRATA_REDIS_KEY_PREFIX: z.string().default(''),
  /** Limit of one cache call (retries included), ms; past it the call counts as a cache outage. */
  STRATA_REDIS_TIMEOUT_MS: env.int(500, 10, 60_000),
  /**
   * Replicas each write of state kept only in Redis (multipart uploads) waits for before it is answered
   * (WAIT, up to half of STRATA_REDIS_TIMEOUT_MS): 1 with the production cluster (a replica per master),
   * so that a failover loses no acknowledged part. A master with no live replica takes the write on its
   * own (its AOF) rather than refusing it: counted in strata_cache_unreplicated_writes_total. 0 for a
   * cluster without replicas.
   */
  STRATA_REDIS_REPLICA_ACKS: env.int(0, 0, 5),
  /** RabbitMQ, `amqp://user:pass@host:5672/vhost`. */
  STRATA_AMQP_URL: z.string().url().optional(),
  /** Topic exchange of the events. */
  STRATA_AMQP_EXCHANGE: z.string().min(1).default('strata.events'),
  /** Prefix of the consumers' queue names (several installations on one vhost), e.g. `prod.`. */
  STRATA_AMQP_QUEUE_PREFIX: z.string().default(''),
};

export type ProductionEnv = z.infer<z.ZodObject<typeof productionEnvShape>>;

/** Production adapter settings as the services' and the platform's options carry them. */
export interface ProductionSettings {
  pgUrl?: string;
  pgReplicaUrls?: string[];
  pgPoolMax?: number;
  /** Connect, statement and query limits of every pool (defaults: PG_TIMEOUT_DEFAULTS). */
  pgTimeouts?: PgTimeouts;
  pgReadConsistency?: 'session' | 'latest';
  pgReplicaWaitMs?: number;
  redisNodes?: string[];
  /** See STRATA_REDIS_PASSWORD. */
  redisPassword?: string;
  redisKeyPrefix?: string;
  redisTimeoutMs?: number;
  /** See STRATA_REDIS_REPLICA_ACKS. */
  redisReplicaAcks?: number;
  amqpUrl?: string;
  amqpExchange?: string;
  amqpQueuePrefix?: string;
}

/** Settings from parsed env (see productionEnvShape). */
export function productionSettings(e: ProductionEnv): ProductionSettings {
  return {
    pgUrl: e.STRATA_PG_URL,
    pgReplicaUrls: e.STRATA_PG_REPLICA_URLS,
    pgPoolMax: e.STRATA_PG_POOL_MAX,
    pgTimeouts: {
      connectTimeoutMs: e.STRATA_PG_CONNECT_TIMEOUT_MS,
      statementTimeoutMs: e.STRATA_PG_STATEMENT_TIMEOUT_MS,
      queryTimeoutMs: e.STRATA_PG_QUERY_TIMEOUT_MS,
    },
    pgReadConsistency: e.STRATA_PG_READ_CONSISTENCY,
    pgReplicaWaitMs: e.STRATA_PG_REPLICA_WAIT_MS,
    redisNodes: e.STRATA_REDIS_NODES,
    redisPassword: e.STRATA_REDIS_PASSWORD,
    redisKeyPrefix: e.STRATA_REDIS_KEY_PREFIX,
    redisTimeoutMs: e.STRATA_REDIS_TIMEOUT_MS,
    redisReplicaAcks: e.STRATA_REDIS_REPLICA_ACKS,
    amqpUrl: e.STRATA_AMQP_URL,
    amqpExchange: e.STRATA_AMQP_EXCHANGE,
    amqpQueuePrefix: e.STRATA_AMQP_QUEUE_PREFIX,
  };
}

/** `host:port` list (STRATA_REDIS_NODES) → ioredis cluster nodes. Bad entries throw. */
export function parseRedisNodes(nodes: string[] | string): ClusterNode[] {
  const list = typeof nodes === 'string' ? nodes.split(/[\s,]+/).filter(Boolean) : nodes;
  return list.map((entry) => {
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(entry.trim());
    if (!m) throw new Error(`STRATA_REDIS_NODES: "${entry}" is not host:port`);
    return { host: m[1]!, port: Number(m[2]) };
  });
}

/** Counts of replica-routed reads, one registry each (reused when present). */
function sqlReadCounter(registry: Registry): Counter<'target' | 'reason'> {
  const name = 'strata_sql_reads_total';
  return (
    (registry.getSingleMetric(name) as Counter<'target' | 'reason'> | undefined) ??
    new Counter({
      name,
      help: 'Read-only SQL statements by where they ran (primary|replica) and why',
      labelNames: ['target', 'reason'] as const,
      registers: [registry],
    })
  );
}

/**
 * The metadata database from settings: with replicas a RoutingSqlClient (primary for writes and
 * read-your-writes, replicas for other reads), else one pool on the primary. Undefined without
 * `pgUrl`. `defaultRead` applies when the settings name no consistency.
 */
export function createProductionSql(
  s: ProductionSettings,
  opts: { defaultRead: 'session' | 'latest'; registry?: Registry; logger?: Logger } & Pick<RoutingSqlClientOptions, 'lsnRefreshMs' | 'unhealthyMs'>,
): SqlClient | undefined {
  if (!s.pgUrl) return undefined;
  const replicas = s.pgReplicaUrls ?? [];
  if (replicas.length === 0) return createPgSqlClient(s.pgUrl, { max: s.pgPoolMax, ...s.pgTimeouts });
  const reads = opts.registry ? sqlReadCounter(opts.registry) : undefined;
  return createPgRoutingSqlClient(s.pgUrl, parseReplicaUrls(replicas.join(',')), {
    max: s.pgPoolMax,
    ...s.pgTimeouts,
    defaultRead: s.pgReadConsistency ?? opts.defaultRead,
    replicaWaitMs: s.pgReplicaWaitMs ?? 10,
    lsnRefreshMs: opts.lsnRefreshMs,
    unhealthyMs: opts.unhealthyMs,
    onRead: reads ? (target, reason) => reads.inc({ target, reason }) : undefined,
    onReplicaError: (replica, err) => opts.logger?.warn({ replica, err }, 'PostgreSQL replica unavailable; its reads go to the primary'),
  });
}

/**
 * The Redis Cluster cache from settings; undefined without nodes. Connects in the background.
 *
 * Its hash tags are those of the standard 3-master split (what `redis-cli --cluster create` and the
 * operator's init Job make: one tag per master), NOT re-derived from the live layout: every process
 * must put a given key under the same tag, or a multipart upload started on one data-plane replica
 * would not be found by another that started after a reshard. A resharded cluster keeps working,
 * only less evenly spread.
 */
export function createProductionCache(
  s: ProductionSettings,
  logger?: Logger,
  opts: Pick<RedisClusterCacheOptions, 'replicaAcks' | 'onUnreplicatedWrite'> = {},
): RedisClusterCache | undefined {
  const nodes = s.redisNodes ?? [];
  if (nodes.length === 0) return undefined;
  const cache = new RedisClusterCache({
    nodes: parseRedisNodes(nodes),
    password: s.redisPassword,
    keyPrefix: s.redisKeyPrefix,
    timeoutMs: s.redisTimeoutMs ?? 500,
    replicaAcks: opts.replicaAcks,
    onUnreplicatedWrite: opts.onUnreplicatedWrite,
  });
  cache.client.once('ready', () => logger?.info({ nodes }, 'connected to the Redis Cluster'));
  return cache;
}

export interface CacheMetrics {
  hits: Counter<'cache'>;
  misses: Counter<'cache'>;
  unavailable: Counter<'cache' | 'operation'>;
  unreplicated: Counter<'cache' | 'operation'>;
}

/**
 * `strata_cache_hits_total` / `strata_cache_misses_total` (hit ratio = hits / (hits + misses)) and
 * `strata_cache_unavailable_total` (calls that met a cache outage), by cache name. Reuses metrics
 * already on the registry.
 */
export function cacheMetrics(registry: Registry): CacheMetrics {
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> =>
    (registry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] });
  return {
    hits: counter('strata_cache_hits_total', 'Cache lookups that found a value, by cache', ['cache'] as const),
    misses: counter('strata_cache_misses_total', 'Cache lookups that found nothing, by cache', ['cache'] as const),
    unavailable: counter('strata_cache_unavailable_total', 'Cache calls that failed because the cache was unreachable, by cache and operation', [
      'cache',
      'operation',
    ] as const),
    unreplicated: counter(
      'strata_cache_unreplicated_writes_total',
      'Cache writes answered with fewer replica acknowledgements than asked (the master had no live replica), by cache and operation',
      ['cache', 'operation'] as const,
    ),
  };
}

const CACHE_CALLS = new Set(['get', 'set', 'del', 'hset', 'hget', 'hgetall', 'hdel', 'sadd', 'srem', 'smembers', 'scard', 'expire']);

/**
 * The same cache object with its lookups (`get`, `hget`) counted as hits or misses and its outages
 * (CacheUnavailableError, from any method) counted, under the name `name`. Every other method passes through.
 */
export function countedCache<C extends StringCache>(cache: C, metrics: CacheMetrics, name: string): C {
  const lookups = new Set(['get', 'hget']);
  return new Proxy(cache, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function' || typeof prop !== 'string' || !CACHE_CALLS.has(prop)) return value;
      return async (...args: unknown[]) => {
        try {
          const result = (await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown;
          if (lookups.has(prop)) (result === undefined ? metrics.misses : metrics.hits).inc({ cache: name });
          return result;
        } catch (err) {
          if (err instanceof CacheUnavailableError) metrics.unavailable.inc({ cache: name, operation: prop });
          throw err;
        }
      };
    },
  });
}
