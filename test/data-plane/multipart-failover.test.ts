import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { keySlot, RedisClusterCache, type UnreplicatedWrite } from '../../images/service-kit/src/index.js';
import { startRedisCluster, type RedisClusterHarness, type RedisClusterNode } from '../support/redis-cluster.js';
import { eventually } from '../support/eventually.js';
import { startObjectLayer, type ObjectLayer } from './harness.js';

const run = promisify(execFile);
const cli = async (node: RedisClusterNode, ...args: string[]) => (await run('redis-cli', ['-h', node.host, '-p', String(node.port), ...args])).stdout;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MiB = 1024 * 1024;
const json = { 'content-type': 'application/json' };
/**
 * How soon multipart works again on a shard whose master died, from the kill: the cluster's failover
 * (cluster-node-timeout, 2 s here, then an election), then nothing more. Generous for a loaded machine.
 */
const RECOVERY_BOUND_MS = 15_000;

/**
 * Multipart state lives in Redis. On the production layout (3 masters, each with a replica, AOF on)
 * losing any one node must cost no acknowledged part and block no bucket for longer than the failover:
 * here the master that holds a bucket's set of uploads (and an upload of it) is killed and stays down,
 * so its replica is promoted and has no replica of its own. Parts acknowledged before (with the
 * replica's WAIT) and after (on the lone master and its AOF, which then also survives a restart of
 * that master) complete with the right bytes; creates in that bucket work again within the failover;
 * creates that failed meanwhile leave nothing behind.
 */
describe('data plane multipart on a six-node Redis Cluster: losing one node loses no part and blocks no bucket', function () {
  this.timeout(240_000);
  let cluster: RedisClusterHarness;
  let cache: RedisClusterCache;
  let layer: ObjectLayer;
  const unreplicated: UnreplicatedWrite[] = [];
  const keyPrefix = `failover-${randomUUID()}:`;
  const buckets = [0, 1, 2, 3, 4, 5].map((i) => `failover-${i}-${randomBytes(4).toString('hex')}`);

  before(async () => {
    cluster = await startRedisCluster({ withReplicas: true });
    cache = new RedisClusterCache({
      nodes: cluster.nodes,
      keyPrefix,
      // A replica has a second to acknowledge (half the call's limit): ample even on a loaded machine.
      timeoutMs: 2000,
      replicaAcks: 1,
      onUnreplicatedWrite: (w) => unreplicated.push(w),
    });
    await cache.connect();
    layer = await startObjectLayer('postgres', { multipartCache: cache });
    for (const bucket of buckets) expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
  });
  after(async () => {
    await layer?.stop();
    await cache?.close();
    await cluster?.stop();
  });

  /** One attempt at a create: its upload id, or undefined when it was refused (503, to retry). */
  const tryInitiate = async (bucket: string, key: string) => {
    const res = await layer.dpFetch('POST', `/internal/multipart/${bucket}/${key}`, JSON.stringify({}), json);
    if (res.status === 503) return undefined;
    expect(res.status, await res.clone().text()).to.equal(200);
    return ((await res.json()) as { uploadId: string }).uploadId;
  };
  /** One attempt at a part: its ETag when the data plane acknowledged it, else undefined (a 503 to retry). */
  const tryPart = async (bucket: string, key: string, uploadId: string, n: number, body: Buffer) => {
    const res = await layer.dpFetch('PUT', `/internal/multipart/${bucket}/${key}/${uploadId}/parts/${n}`, body as BodyInit);
    if (res.status === 503) return undefined;
    expect(res.status, await res.clone().text()).to.equal(200);
    return ((await res.json()) as { etag: string }).etag;
  };
  /** A client's retries: until the attempt succeeds; answers its result and when it did. */
  const retried = async <T>(what: string, attempt: () => Promise<T | undefined>) => {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(200)) {
      const result = await attempt();
      if (result !== undefined) return { result, at: Date.now() };
    }
    throw new Error(`${what} never succeeded`);
  };

  /** The master that serves a cache key (as stored), and its replica while the slot map lists one. */
  const holders = async (baseKey: string) => {
    const slot = keySlot(cache.storedKey(baseKey));
    const node = (entry: [string, number, ...unknown[]] | undefined) => [...cluster.nodes, ...cluster.replicas].find((n) => n.port === Number(entry?.[1]));
    let found: { master?: RedisClusterNode; replica?: RedisClusterNode } = {};
    await eventually(async () => {
      const [, , master, replica] = (await cache.client.cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end)!;
      found = { master: node(master), replica: node(replica) };
      return found.master !== undefined && found.replica !== undefined;
    }, 'the slot map to list the master and its replica');
    return { master: found.master!, replica: found.replica! };
  };
  const bucketId = async (bucket: string) => Number((await layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [bucket])).rows[0]!.id);
  const bucketSetKey = (id: number) => `strata:mpu-bucket-id:{${id}}`;
  /** Upload ids whose record is in the cache (on any node). */
  const recordedUploads = async () => {
    const ids = new Set<string>();
    for (const node of [...cluster.nodes, ...cluster.replicas]) {
      for (const key of (await cli(node, '--scan', '--pattern', `*${keyPrefix}strata:mpu:{*`)).split('\n').filter(Boolean)) {
        ids.add(/strata:mpu:\{([^}]+)\}/.exec(key)![1]!);
      }
    }
    return ids;
  };

  it('parts acknowledged before and after the failover complete, creates resume within the bound, failed creates leave nothing', async () => {
    // The victim: the master that holds the set of uploads of one of the buckets (`tagged`), but not
    // the account's set (which a create checks first).
    const ids = await Promise.all(buckets.map(bucketId));
    const accountMaster = (await holders('strata:mpu-account:{alice}')).master;
    let taggedIndex = 0;
    while ((await holders(bucketSetKey(ids[taggedIndex]!))).master.port === accountMaster.port) taggedIndex++;
    const tagged = buckets[taggedIndex]!;
    const { master: victimMaster, replica: promoted } = await holders(bucketSetKey(ids[taggedIndex]!));
    // `victim`, of the tagged bucket, is an upload whose record the victim master holds too; others on every master.
    let victimId: string | undefined;
    for (let i = 0; !victimId; i++) {
      if (i > 40) throw new Error('no upload landed on the victim master');
      const uploadId = (await tryInitiate(tagged, 'victim'))!;
      if ((await holders(`strata:mpu:{${uploadId}}`)).master.port === victimMaster.port) victimId = uploadId;
      else expect((await layer.dpFetch('DELETE', `/internal/multipart/${tagged}/victim/${uploadId}`)).status).to.equal(204);
    }
    const victim = { bucket: tagged, key: 'victim', uploadId: victimId, parts: new Map<number, { etag: string; body: Buffer }>() };
    const uploads = [victim];
    for (const [i, bucket] of buckets.entries()) uploads.push({ bucket, key: `k${i}`, uploadId: (await tryInitiate(bucket, `k${i}`))!, parts: new Map() });
    for (const u of uploads) {
      const body = randomBytes(5 * MiB);
      u.parts.set(1, { etag: (await retried('part 1', () => tryPart(u.bucket, u.key, u.uploadId, 1, body))).result, body });
    }
    expect(unreplicated, 'every master has its replica: each write was acknowledged by it').to.deep.equal([]);

    // The victim master dies and stays down: its replica takes over, alone.
    const killed = cluster.processOf(victimMaster);
    const exited = new Promise((resolve) => killed.once('exit', resolve));
    killed.kill('SIGKILL');
    const killedAt = Date.now();
    await exited;
    const failed: string[] = [];
    const created: string[] = [];
    const [firstCreate, part2] = await Promise.all([
      retried('a create in the bucket whose set the dead master held', async () => {
        const uploadId = await tryInitiate(tagged, 'new');
        if (uploadId) created.push(uploadId);
        else failed.push('new');
        return uploadId;
      }),
      (async () => {
        const body = randomBytes(5 * MiB);
        const acked = await retried('part 2 of the upload on the dead master', () => tryPart(tagged, 'victim', victim.uploadId, 2, body));
        victim.parts.set(2, { etag: acked.result, body });
        return acked;
      })(),
    ]);
    expect(failed.length, 'creates were refused while the shard had no master').to.be.greaterThan(0);
    expect(firstCreate.at - killedAt, 'create in the tagged bucket: time to recover').to.be.below(RECOVERY_BOUND_MS);
    expect(part2.at - killedAt, 'part on the dead master: time to recover').to.be.below(RECOVERY_BOUND_MS);
    expect(/role:master/.test(await cli(promoted, 'info', 'replication'))).to.equal(true);
    expect(await cli(promoted, 'info', 'replication')).to.match(/connected_slaves:0/);
    // The promoted master has no replica: its writes were taken on its own (and reported).
    expect(unreplicated.length).to.be.greaterThan(0);
    expect(unreplicated.every((w) => w.attached === 0)).to.equal(true);
    // More parts and creates on every master, the lone one included.
    for (const u of uploads) {
      // Every part but the last one of its upload is at least 5 MiB (the victim gets a fourth).
      const body = randomBytes(u === victim ? 5 * MiB : 100);
      u.parts.set(3, { etag: (await retried('part 3', () => tryPart(u.bucket, u.key, u.uploadId, 3, body))).result, body });
    }
    created.push((await retried('another create', () => tryInitiate(tagged, 'newer'))).result);

    // What the lone master took is in its AOF: a crash and restart of it keeps every acknowledged part.
    const lone = cluster.processOf(promoted);
    const loneExited = new Promise((resolve) => lone.once('exit', resolve));
    lone.kill('SIGKILL');
    await loneExited;
    await cluster.restart(promoted);
    await eventually(async () => /cluster_state:ok/.test(await cli(promoted, 'cluster', 'info')), 'the restarted master to serve its slots');

    // The dead node comes back (as its pod would) and follows the new master: writes wait for it again.
    await cluster.restart(victimMaster);
    await eventually(async () => /master_link_status:up/.test(await cli(victimMaster, 'info', 'replication')), 'the old master to follow the new one');
    const reported = unreplicated.length;
    const body4 = randomBytes(100);
    victim.parts.set(4, { etag: (await retried('part 4', () => tryPart(tagged, 'victim', victim.uploadId, 4, body4))).result, body: body4 });
    expect(unreplicated.length, 'with its replica back, the master has each write acknowledged').to.equal(reported);

    for (const u of uploads) {
      const parts = [...u.parts.entries()].sort(([a], [b]) => a - b);
      const res = await layer.dpFetch(
        'POST',
        `/internal/multipart/${u.bucket}/${u.key}/${u.uploadId}/complete`,
        JSON.stringify({ parts: parts.map(([partNumber, p]) => ({ partNumber, etag: p.etag })) }),
        json,
      );
      expect(res.status, `${u.key}: ${await res.clone().text()}`).to.equal(200);
      const got = Buffer.from(await (await layer.dpFetch('GET', `/internal/objects/${u.bucket}/${u.key}`)).arrayBuffer());
      expect(got.equals(Buffer.concat(parts.map(([, p]) => p.body))), u.key).to.equal(true);
    }

    // Left: exactly the creates that were answered (records, and members of the bucket's and the account's sets).
    // A refused create takes back its members where it can; one whose SADD's outcome was unknown (a timeout
    // while the shard failed over) may leave a member, but never a record: such a member is no upload
    // (listings and the cap skip it, and drop it after a minute: test/data-plane/upload-state.test.ts).
    const recorded = [...(await recordedUploads())].sort();
    expect(recorded).to.deep.equal([...created].sort());
    for (const setKey of [bucketSetKey(ids[taggedIndex]!), 'strata:mpu-account:{alice}'])
      expect(await cache.smembers(setKey), setKey).to.include.members(created);
    const listed = ((await (await layer.dpFetch('GET', `/internal/multipart/${tagged}`)).json()) as { uploads: Array<{ uploadId: string }> }).uploads;
    expect(listed.map((u) => u.uploadId).sort(), 'the bucket lists exactly the answered creates').to.deep.equal([...created].sort());
  });
});
