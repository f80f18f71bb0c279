import { expect } from 'chai';
import { z } from 'zod';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import {
  CacheUnavailableError,
  cacheMetrics,
  countedCache,
  createProductionCache,
  createProductionSql,
  createRegistry,
  loadConfig,
  parseRedisNodes,
  productionEnvShape,
  productionSettings,
  RoutingSqlClient,
  type StringCache,
} from '../../images/service-kit/src/index.js';

const schema = z.object(productionEnvShape);

describe('service kit: production adapters selected by env', () => {
  it('leaves every adapter unset without env (the embedded defaults stay)', () => {
    const s = productionSettings(loadConfig('test', schema, {}));
    expect(s.pgUrl).to.equal(undefined);
    expect(s.pgReplicaUrls).to.deep.equal([]);
    expect(s.redisNodes).to.deep.equal([]);
    expect(s.amqpUrl).to.equal(undefined);
    expect(s.amqpExchange).to.equal('strata.events');
    expect(createProductionSql(s, { defaultRead: 'session' })).to.equal(undefined);
    expect(createProductionCache(s)).to.equal(undefined);
  });

  it('reads the production variables, lists split on commas', () => {
    const s = productionSettings(
      loadConfig('test', schema, {
        STRATA_PG_URL: 'postgres://u@db-0:5432/strata',
        STRATA_PG_REPLICA_URLS: 'postgres://u@db-1:5432/strata, postgres://u@db-2:5432/strata',
        STRATA_PG_READ_CONSISTENCY: 'latest',
        STRATA_REDIS_NODES: 'redis-0:6379,redis-1:6379 , redis-2:6379',
        STRATA_AMQP_URL: 'amqp://guest:guest@rabbit:5672',
        STRATA_AMQP_QUEUE_PREFIX: 'prod.',
      }),
    );
    expect(s.pgReplicaUrls).to.deep.equal(['postgres://u@db-1:5432/strata', 'postgres://u@db-2:5432/strata']);
    expect(s.pgReadConsistency).to.equal('latest');
    expect(s.redisNodes).to.deep.equal(['redis-0:6379', 'redis-1:6379', 'redis-2:6379']);
    expect(s.amqpQueuePrefix).to.equal('prod.');
  });

  it('rejects a bad value with the variable named', () => {
    expect(() => loadConfig('test', schema, { STRATA_PG_READ_CONSISTENCY: 'eventual' })).to.throw(/STRATA_PG_READ_CONSISTENCY/);
    expect(() => loadConfig('test', schema, { STRATA_AMQP_URL: 'not a url' })).to.throw(/STRATA_AMQP_URL/);
  });

  it('parses Redis Cluster nodes as host:port', () => {
    expect(parseRedisNodes('a:7000, b.example:7001')).to.deep.equal([
      { host: 'a', port: 7000 },
      { host: 'b.example', port: 7001 },
    ]);
    expect(parseRedisNodes(['[::1]:7002'])).to.deep.equal([{ host: '::1', port: 7002 }]);
    expect(() => parseRedisNodes('redis-without-port')).to.throw(/host:port/);
  });

  it('routes reads only when there are replicas', async () => {
    const plain = createProductionSql({ pgUrl: 'postgres://postgres@127.0.0.1:5432/postgres' }, { defaultRead: 'session' })!;
    const routed = createProductionSql(
      { pgUrl: 'postgres://postgres@127.0.0.1:5432/postgres', pgReplicaUrls: ['postgres://postgres@127.0.0.1:5432/postgres'] },
      { defaultRead: 'latest' },
    )!;
    try {
      expect(plain).not.to.be.instanceOf(RoutingSqlClient);
      expect(routed).to.be.instanceOf(RoutingSqlClient);
      expect((routed as RoutingSqlClient).replicaStatus().map((r) => r.name)).to.deep.equal(['127.0.0.1:5432']);
    } finally {
      await plain.close();
      await routed.close();
    }
  });

  it('counts cache hits, misses and outages without changing what the cache answers', async () => {
    const registry = createRegistry('test', false);
    const metrics = cacheMetrics(registry);
    const cache = countedCache(new InMemoryCache(), metrics, 'unit');
    await cache.set('k', 'v');
    expect(await cache.get('k')).to.equal('v');
    expect(await cache.get('missing')).to.equal(undefined);
    await cache.hset('h', 'f', '1');
    expect(await cache.hget('h', 'f')).to.equal('1');
    expect(await cache.hgetall('h')).to.deep.equal({ f: '1' });

    // A cache that is down: its error passes through, counted.
    const unreachable: StringCache = {
      get: async () => {
        throw new CacheUnavailableError('get', new Error('connection refused'));
      },
      set: async () => undefined,
      del: async () => 0,
    };
    const down = countedCache(unreachable, metrics, 'unit');
    const err = await down.get('k').catch((e: unknown) => e);
    expect(err).to.be.instanceOf(CacheUnavailableError);

    const text = await registry.metrics();
    expect(text).to.match(/^strata_cache_hits_total\{cache="unit",service="test"\} 2$/m);
    expect(text).to.match(/^strata_cache_misses_total\{cache="unit",service="test"\} 1$/m);
    expect(text).to.match(/^strata_cache_unavailable_total\{cache="unit",operation="get",service="test"\} 1$/m);
    // A second call on the same registry reuses the metrics instead of failing.
    expect(cacheMetrics(registry).hits).to.equal(metrics.hits);
  });
});
