import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import {
  createKeySharder,
  keySlot,
  pickHashTags,
  shardedKey,
  slotRangesFromClusterSlots,
  standardSlotRanges,
  type SlotRange,
} from '../../../images/service-kit/src/hash-tags.js';
import {
  CacheUnavailableError,
  RedisClusterCache,
  degradeWhenUnavailable,
  type StringCache,
  type UnreplicatedWrite,
} from '../../../images/service-kit/src/redis-cluster-cache.js';
import type { Cache as DataPlaneCache } from '../../../images/data-plane/src/cache/cache.js';
import { sharedRedisCluster, startRedisCluster, type RedisClusterHarness } from '../../support/redis-cluster.js';
import { rejectionOf } from '../../support/rejection.js';

const ownerOf = (ranges: SlotRange[], slot: number) => ranges.find((r) => slot >= r.start && slot <= r.end)?.master;

describe('control-plane cache: hash tags and the Redis Cluster adapter', function () {
  this.timeout(60_000);
  let cluster: RedisClusterHarness;
  let node: Redis;
  let ranges: SlotRange[];

  before(async () => {
    cluster = await sharedRedisCluster();
    node = new Redis({ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port, lazyConnect: true });
    await node.connect();
    ranges = slotRangesFromClusterSlots(await node.cluster('SLOTS'));
  });
  after(() => node?.disconnect());

  describe('keySlot', () => {
    it('agrees with CLUSTER KEYSLOT, hash tags included', async () => {
      const keys = [
        '',
        'a',
        'foo',
        '123456789',
        'user1000',
        '{user1000}.following',
        'foo{}{bar}',
        'foo{{bar}}zap',
        'foo{bar}{zap}',
        '{}',
        '{',
        '}',
        'x{y',
        'ключ',
        '日本語{タグ}',
        'strata:blob:d41d8cd98f00b204e9800998ecf8427e:0',
        ...Array.from({ length: 50 }, (_, i) => `k${i}:${randomUUID()}`),
      ];
      for (const key of keys) {
        const expected = (await node.cluster('KEYSLOT', key)) as number;
        expect(keySlot(key), key).to.equal(expected);
      }
    });

    it('matches the CRC16/XMODEM check value of the spec', () => {
      // The spec's reference value: CRC16 of "123456789" is 0x31C3 (12739), below 16384.
      expect(keySlot('123456789')).to.equal(0x31c3);
    });
  });

  describe('pickHashTags', () => {
    it('puts each tag on a different master of the standard split', () => {
      const standard = standardSlotRanges(3);
      expect(standard.map((r) => [r.start, r.end])).to.deep.equal([
        [0, 5460],
        [5461, 10922],
        [10923, 16383],
      ]);
      const tags = pickHashTags(standard);
      expect(tags).to.have.length(3);
      const owners = tags.map((t) => ownerOf(standard, keySlot(t)));
      expect(new Set(owners).size).to.equal(3);
      expect(tags.every((t) => /^\{s\d+\}$/.test(t))).to.equal(true);
    });

    it('puts each tag on a different master of the real cluster (CLUSTER SLOTS / CLUSTER SHARDS)', async () => {
      const tags = pickHashTags(ranges);
      const owners = new Set<string>();
      for (const tag of tags) {
        const slot = (await node.cluster('KEYSLOT', `${tag}anything`)) as number;
        owners.add(ownerOf(ranges, slot)!);
      }
      expect(owners.size).to.equal(3);
      expect([...owners].sort()).to.deep.equal(cluster.nodes.map((n) => `${n.host}:${n.port}`).sort());
    });

    it('follows a layout that is not the standard split', () => {
      const odd: SlotRange[] = [
        { start: 0, end: 99, master: 'a' },
        { start: 100, end: 16000, master: 'b' },
        { start: 16001, end: 16383, master: 'c' },
      ];
      const tags = pickHashTags(odd);
      expect(tags.map((t) => ownerOf(odd, keySlot(t)))).to.deep.equal(['a', 'b', 'c']);
    });
  });

  describe('shardedKey', () => {
    it('is deterministic and spreads distinct keys over all three tags', () => {
      const sharder = createKeySharder(pickHashTags());
      const counts = new Map<string, number>();
      for (let i = 0; i < 300; i++) {
        const key = `blob:${i}`;
        const sharded = sharder.shardedKey(key);
        expect(sharded).to.equal(shardedKey(key));
        expect(sharded.endsWith(key)).to.equal(true);
        const tag = sharder.tags.find((t) => sharded.startsWith(t))!;
        counts.set(tag, (counts.get(tag) ?? 0) + 1);
      }
      expect(counts.size).to.equal(3);
      for (const n of counts.values()) expect(n).to.be.greaterThan(50);
    });

    it('keeps the tag in force even when the base key has braces of its own', () => {
      const key = shardedKey('user{42}:x');
      const tag = createKeySharder().tags.find((t) => key.startsWith(t))!;
      expect(keySlot(key)).to.equal(keySlot(tag));
    });
  });

  describe('RedisClusterCache on a real 3-master cluster', () => {
    let cache: RedisClusterCache;
    const prefix = `test-${randomUUID()}:`;

    before(async () => {
      cache = new RedisClusterCache({ nodes: cluster.nodes, keyPrefix: prefix });
      await cache.connect();
    });
    after(() => cache?.close());

    it('is a cache for both planes (their interfaces, their semantics)', () => {
      const forControlPlane: StringCache = cache;
      const forDataPlane: DataPlaneCache = cache;
      expect(forControlPlane).to.equal(forDataPlane);
    });

    it('get/set with TTL/del', async () => {
      expect(await cache.get('missing')).to.equal(undefined);
      await cache.set('k1', 'v1');
      await cache.set('k2', 'v2', 60);
      expect(await cache.get('k1')).to.equal('v1');
      expect(await cache.get('k2')).to.equal('v2');
      const ttl = await cache.client.ttl(cache.storedKey('k2'));
      expect(ttl).to.be.within(1, 60);
      expect(await cache.client.ttl(cache.storedKey('k1'))).to.equal(-1);
      expect(await cache.del('k1', 'k2', 'never-set')).to.equal(2);
      expect(await cache.get('k1')).to.equal(undefined);
      expect(await cache.del()).to.equal(0);
    });

    it('keeps multipart part state in a hash and a set, with a TTL', async () => {
      const uploadId = randomUUID();
      const upload = `strata:mpu:{${uploadId}}`;
      expect(await cache.hgetall(upload)).to.deep.equal({});
      expect(await cache.hget(upload, 'info')).to.equal(undefined);
      await cache.hset(upload, 'info', '{"key":"a"}');
      await cache.expire(upload, 3600);
      await cache.hset(upload, '1', '{"etag":"a"}');
      await cache.hset(upload, '2', '{"etag":"b"}');
      expect(await cache.hget(upload, '1')).to.equal('{"etag":"a"}');
      expect(await cache.hgetall(upload)).to.deep.equal({ info: '{"key":"a"}', '1': '{"etag":"a"}', '2': '{"etag":"b"}' });
      expect(await cache.client.ttl(cache.storedKey(upload))).to.be.within(1, 3600);
      await cache.hdel(upload, '2');
      expect(Object.keys(await cache.hgetall(upload)).sort()).to.deep.equal(['1', 'info']);

      const uploads = `strata:mpu-bucket:{b-${uploadId}}`;
      expect(await cache.smembers(uploads)).to.deep.equal([]);
      await cache.sadd(uploads, uploadId);
      await cache.sadd(uploads, 'other');
      expect((await cache.smembers(uploads)).sort()).to.deep.equal([uploadId, 'other'].sort());
      await cache.srem(uploads, 'other');
      expect(await cache.smembers(uploads)).to.deep.equal([uploadId]);
      expect(await cache.del(upload, uploads)).to.equal(2);
    });

    it('keeps keys grouped by a tag of their own on one slot', async () => {
      const id = randomUUID();
      const slots = new Set<number>();
      for (const key of [`strata:mpu:{${id}}`, `strata:mpu:{${id}}:parts`, `other:{${id}}`]) {
        slots.add((await node.cluster('KEYSLOT', cache.storedKey(key))) as number);
      }
      expect(slots.size).to.equal(1);
      // ...while different uploads still spread over all three masters.
      const owners = new Set<string>();
      for (let i = 0; i < 30; i++) {
        owners.add(ownerOf(ranges, (await node.cluster('KEYSLOT', cache.storedKey(`strata:mpu:{${randomUUID()}}`))) as number)!);
      }
      expect(owners.size).to.equal(3);
    });

    it('writes keys on all three masters, each where CLUSTER KEYSLOT + CLUSTER SHARDS say', async () => {
      const keys = Array.from({ length: 30 }, (_, i) => `hot:${i}`);
      for (const key of keys) await cache.set(key, 'x', 300);
      // CLUSTER SHARDS: which master serves which slots, as the server itself reports it.
      const shards = (await node.call('CLUSTER', 'SHARDS')) as unknown[][];
      const shardRanges: SlotRange[] = shards.flatMap((shard) => {
        const fields = new Map<string, unknown>();
        for (let i = 0; i < shard.length; i += 2) fields.set(String(shard[i]), shard[i + 1]);
        const slots = fields.get('slots') as number[];
        const nodeFields = (fields.get('nodes') as unknown[][]).map((n) => {
          const m = new Map<string, unknown>();
          for (let i = 0; i < n.length; i += 2) m.set(String(n[i]), n[i + 1]);
          return m;
        });
        const master = nodeFields.find((m) => m.get('role') === 'master')!;
        const out: SlotRange[] = [];
        for (let i = 0; i < slots.length; i += 2) out.push({ start: Number(slots[i]), end: Number(slots[i + 1]), master: `127.0.0.1:${master.get('port')}` });
        return out;
      });
      const expectedOwners = new Set<string>();
      for (const key of keys) {
        const slot = (await node.cluster('KEYSLOT', cache.storedKey(key))) as number;
        expectedOwners.add(ownerOf(shardRanges, slot)!);
      }
      expect(expectedOwners.size).to.equal(3);
      // And the keys are really there: each master holds some of this test's keys.
      for (const n of cluster.nodes) {
        const direct = new Redis({ host: n.host, port: n.port, lazyConnect: true });
        await direct.connect();
        try {
          const found: string[] = [];
          let cursor = '0';
          do {
            const [next, batch] = await direct.scan(cursor, 'MATCH', `*${prefix}hot:*`, 'COUNT', 1000);
            cursor = next;
            found.push(...batch);
          } while (cursor !== '0');
          expect(found.length, `keys on ${n.port}`).to.be.greaterThan(0);
          expect(await direct.dbsize()).to.be.greaterThan(0);
        } finally {
          direct.disconnect();
        }
      }
    });

    it('lets a deliberate server error through unchanged (not an outage)', async () => {
      await cache.set('plain', 'x');
      const error = await rejectionOf(cache.hgetall('plain'));
      expect(error).to.be.instanceOf(Error);
      expect(error).not.to.be.instanceOf(CacheUnavailableError);
      expect((error as Error).message).to.match(/WRONGTYPE/);
    });

    it('with replicaAcks, a write waits for its replica; asking more than a master has is answered and reported, not failed', async () => {
      const unreplicated: UnreplicatedWrite[] = [];
      const acked = new RedisClusterCache({
        nodes: cluster.nodes,
        keyPrefix: `acks-${randomUUID()}:`,
        timeoutMs: 1000,
        replicaAcks: 1,
        onUnreplicatedWrite: (w) => unreplicated.push(w),
      });
      const tooMany = new RedisClusterCache({
        nodes: cluster.nodes,
        keyPrefix: `acks-${randomUUID()}:`,
        timeoutMs: 1000,
        replicaAcks: 2,
        replicaAckTimeoutMs: 50,
        onUnreplicatedWrite: (w) => unreplicated.push(w),
      });
      try {
        // Fresh clients fail fast until the cluster is ready (no offline queue): wait for it, as services do at start.
        await Promise.all([acked.connect(), tooMany.connect()]);
        await acked.hset('h', 'f', 'v');
        await acked.sadd('s', 'm');
        await acked.set('k', 'v', 60);
        expect([await acked.hget('h', 'f'), await acked.smembers('s'), await acked.get('k'), await acked.del('k', 'h')]).to.deep.equal(['v', ['m'], 'v', 2]);
        expect(unreplicated).to.deep.equal([]);
        // Each master of the shared cluster has one replica: it acknowledges, the second asked for is missing.
        await tooMany.hset('h', 'f', 'v');
        expect(await tooMany.hget('h', 'f')).to.equal('v');
        expect(unreplicated).to.deep.equal([{ operation: 'hset', attached: 1, acknowledged: 1 }]);
      } finally {
        await acked.close();
        await tooMany.close();
      }
    });

    it('hset and sadd with a TTL send the value and the TTL in one transaction (MULTI/EXEC)', async () => {
      for (const replicaAcks of [0, 1]) {
        const writer = new RedisClusterCache({ nodes: cluster.nodes, keyPrefix: `ttl-${randomUUID()}:`, timeoutMs: 1000, replicaAcks });
        try {
          await writer.connect();
          await writer.hset('h', 'f', 'v', 600);
          await writer.sadd('s', 'm', 600);
          await writer.hset('h', 'g', 'w');
          expect(await writer.hgetall('h')).to.deep.equal({ f: 'v', g: 'w' });
          expect(await writer.smembers('s')).to.deep.equal(['m']);
          for (const key of ['h', 's']) expect(await writer.client.ttl(writer.storedKey(key)), `${key}, replicaAcks ${replicaAcks}`).to.be.within(590, 600);
          // A deliberate server error inside the transaction surfaces as itself (a bug), not as an outage.
          await writer.set('plain', 'x');
          const error = await rejectionOf(writer.sadd('plain', 'm', 5));
          expect(error).not.to.be.instanceOf(CacheUnavailableError);
          expect((error as Error).message).to.match(/WRONGTYPE/);
        } finally {
          await writer.close();
        }
      }
    });
  });

  describe('outage', () => {
    it('fails fast with CacheUnavailableError when the cluster is stopped, so callers can degrade', async function () {
      // A private cluster: stopping the shared one would break other suites.
      this.timeout(30_000);
      const own = await startRedisCluster();
      const cache = new RedisClusterCache({ nodes: own.nodes, keyPrefix: `outage-${randomUUID()}:`, timeoutMs: 500, retries: 2 });
      try {
        await cache.connect();
        await cache.set('k', 'v');
        expect(await cache.get('k')).to.equal('v');
        await own.stop();
        const calls: Array<[string, () => Promise<unknown>]> = [
          ['get', () => cache.get('k')],
          ['set', () => cache.set('k', 'v', 10)],
          ['del', () => cache.del('k')],
          ['hset', () => cache.hset('h', 'a', '1')],
          ['hget', () => cache.hget('h', 'a')],
          ['hgetall', () => cache.hgetall('h')],
          ['hdel', () => cache.hdel('h', 'a')],
          ['sadd', () => cache.sadd('s', 'm')],
          ['smembers', () => cache.smembers('s')],
          ['expire', () => cache.expire('h', 10)],
        ];
        for (const [name, call] of calls) {
          const error = await rejectionOf(call());
          expect(error, name).to.be.instanceOf(CacheUnavailableError);
          expect((error as CacheUnavailableError).operation).to.equal(name);
        }
      } finally {
        await own.stop();
        await cache.close();
      }
    });

    it('degradeWhenUnavailable turns the outage into cache misses for the control plane', async function () {
      this.timeout(30_000);
      const own = await startRedisCluster();
      const cache = new RedisClusterCache({ nodes: own.nodes, keyPrefix: `degrade-${randomUUID()}:`, timeoutMs: 500 });
      const degraded: CacheUnavailableError[] = [];
      const forgiving = degradeWhenUnavailable(cache, (err) => degraded.push(err));
      try {
        await cache.connect();
        await forgiving.set('bucket', '{"name":"b"}', 60);
        expect(await forgiving.get('bucket')).to.equal('{"name":"b"}');
        expect(degraded).to.have.length(0);
        await own.stop();
        expect(await forgiving.get('bucket')).to.equal(undefined);
        await forgiving.set('bucket', 'x', 60);
        expect(await forgiving.del('bucket')).to.equal(0);
        expect(degraded.map((e) => e.operation)).to.deep.equal(['get', 'set', 'del']);
      } finally {
        await own.stop();
        await cache.close();
      }
    });

    it('with replicaAcks, a cluster without replicas takes writes at once (reported as unreplicated), not as an outage', async function () {
      // A master with no replica (one died, or it was just promoted) must not block the state kept there.
      this.timeout(30_000);
      const own = await startRedisCluster();
      const unreplicated: UnreplicatedWrite[] = [];
      const cache = new RedisClusterCache({
        nodes: own.nodes,
        keyPrefix: `lonely-${randomUUID()}:`,
        timeoutMs: 1000,
        replicaAcks: 1,
        replicaAckTimeoutMs: 500,
        onUnreplicatedWrite: (w) => unreplicated.push(w),
      });
      try {
        await cache.connect();
        await cache.hset('h', 'f', 'v', 60);
        await cache.sadd('s', 'm');
        expect([await cache.hget('h', 'f'), await cache.smembers('s')]).to.deep.equal(['v', ['m']]);
        expect(unreplicated).to.deep.equal([
          { operation: 'hset', attached: 0, acknowledged: 0 },
          { operation: 'sadd', attached: 0, acknowledged: 0 },
        ]);
      } finally {
        await cache.close();
        await own.stop();
      }
    });

    it('fails fast when the cluster was never reachable', async function () {
      this.timeout(30_000);
      const cache = new RedisClusterCache({ nodes: [{ host: '127.0.0.1', port: 1 }], timeoutMs: 300 });
      try {
        expect(await rejectionOf(cache.get('k'))).to.be.instanceOf(CacheUnavailableError);
      } finally {
        await cache.close();
      }
    });
  });
});
