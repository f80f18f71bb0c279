import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { keySlot, RedisClusterCache } from '../../images/service-kit/src/index.js';
import { startRedisCluster, type RedisClusterHarness, type RedisClusterNode } from '../support/redis-cluster.js';
import { startObjectLayer, type ObjectLayer } from './harness.js';

const run = promisify(execFile);
const cli = async (node: RedisClusterNode, ...args: string[]) => (await run('redis-cli', ['-h', node.host, '-p', String(node.port), ...args])).stdout;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MiB = 1024 * 1024;
const json = { 'content-type': 'application/json' };

/** Poll `check` until it answers true (or fail after `timeoutMs`). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

/**
 * Multipart part state lives only in Redis. On the production layout (3 masters, each with a replica,
 * AOF on) a master's failure promotes its replica, and a part the data plane acknowledged must be in
 * the promoted replica: part writes wait for a replica (WAIT). Here the replica of the master that holds
 * an upload is paused while a part arrives (so only the master has it), then the master is killed and
 * the replica takes over: whatever was acknowledged completes with the right bytes.
 */
describe('data plane multipart on a six-node Redis Cluster: a master failover loses no acknowledged part', function () {
  this.timeout(180_000);
  let cluster: RedisClusterHarness;
  let cache: RedisClusterCache;
  let layer: ObjectLayer;
  const bucket = `failover-${randomBytes(4).toString('hex')}`;

  before(async () => {
    cluster = await startRedisCluster({ withReplicas: true });
    cache = new RedisClusterCache({ nodes: cluster.nodes, keyPrefix: `failover-${randomUUID()}:`, timeoutMs: 1000, replicaAcks: 1 });
    await cache.connect();
    layer = await startObjectLayer('postgres', { multipartCache: cache });
    expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
  });
  after(async () => {
    await layer?.stop();
    await cache?.close();
    await cluster?.stop();
  });

  const initiate = async (key: string) => {
    const res = await layer.dpFetch('POST', `/internal/multipart/${bucket}/${key}`, JSON.stringify({}), json);
    expect(res.status, await res.clone().text()).to.equal(200);
    return ((await res.json()) as { uploadId: string }).uploadId;
  };
  /** One attempt at a part: its ETag when the data plane acknowledged it, else undefined (a 503 to retry). */
  const tryPart = async (key: string, uploadId: string, n: number, body: Buffer) => {
    const res = await layer.dpFetch('PUT', `/internal/multipart/${bucket}/${key}/${uploadId}/parts/${n}`, body as BodyInit);
    if (res.status === 503) return undefined;
    expect(res.status, await res.clone().text()).to.equal(200);
    return ((await res.json()) as { etag: string }).etag;
  };
  /** A client's retries: until the part is acknowledged. */
  const uploadPart = async (key: string, uploadId: string, n: number, body: Buffer) => {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(200)) {
      const etag = await tryPart(key, uploadId, n, body);
      if (etag) return etag;
    }
    throw new Error(`part ${n} of ${key} never acknowledged`);
  };
  /** The master that holds an upload's state, and its replica (once the cluster's slot map lists it). */
  const holders = async (uploadId: string) => {
    const slot = keySlot(cache.storedKey(`strata:mpu:{${uploadId}}`));
    const node = (entry: [string, number, ...unknown[]] | undefined) => [...cluster.nodes, ...cluster.replicas].find((n) => n.port === Number(entry?.[1]));
    let found: { master?: RedisClusterNode; replica?: RedisClusterNode } = {};
    await until('the slot map to list the upload master and its replica', async () => {
      const [, , master, replica] = (await cache.client.cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end)!;
      found = { master: node(master), replica: node(replica) };
      return found.master !== undefined && found.replica !== undefined;
    });
    return { master: found.master!, replica: found.replica! };
  };

  it('parts acknowledged before, during and after the failover all complete with the right bytes', async () => {
    // Uploads on every master; the failover hits the one that holds `victim`.
    const uploads = await Promise.all(
      ['victim', 'b', 'c', 'd', 'e', 'f'].map(async (key) => ({
        key,
        uploadId: await initiate(key),
        parts: new Map<number, { etag: string; body: Buffer }>(),
      })),
    );
    const victim = uploads[0]!;
    const { master, replica } = await holders(victim.uploadId);
    for (const u of uploads) {
      const body = randomBytes(5 * MiB);
      u.parts.set(1, { etag: await uploadPart(u.key, u.uploadId, 1, body), body });
    }

    // The replica falls behind and is cut off: paused, it stops reading its link, and once the master's
    // output buffer for it overflows the master drops the link. A part written now reaches the master only.
    const paused = cluster.processOf(replica);
    paused.kill('SIGSTOP');
    await cli(master, 'config', 'set', 'client-output-buffer-limit', 'replica 1mb 1mb 0');
    const filler = cache.storedKey(`filler:{${victim.uploadId}}`);
    for (let i = 0; /connected_slaves:[1-9]/.test(await cli(master, 'info', 'replication')); i++) {
      if (i > 50) throw new Error('the master kept its paused replica');
      await cache.client.set(filler, randomBytes(2 * MiB));
    }
    const during = randomBytes(1000);
    const acknowledged = await tryPart(victim.key, victim.uploadId, 2, during);
    if (acknowledged) victim.parts.set(2, { etag: acknowledged, body: during });
    // Meanwhile uploads on the other masters go on, and go on through the failover.
    let failingOver = true;
    const others = (async () => {
      for (let round = 0; failingOver || round < 2; round++) {
        for (const u of uploads.slice(1)) {
          const body = randomBytes(100 + round);
          u.parts.set(2, { etag: await uploadPart(u.key, u.uploadId, 2, body), body });
        }
      }
    })();

    const killed = cluster.processOf(master);
    const exited = new Promise((resolve) => killed.once('exit', resolve));
    killed.kill('SIGKILL');
    await exited;
    paused.kill('SIGCONT');
    await cli(replica, 'cluster', 'failover', 'takeover');
    await until(
      'the replica to take over',
      async () => /role:master/.test(await cli(replica, 'info', 'replication')) && /cluster_state:ok/.test(await cli(replica, 'cluster', 'info')),
    );
    // The failed node comes back (as its pod would) and rejoins as the new master's replica: until then
    // that master's writes cannot be acknowledged by a replica, and are refused (503, retried).
    await cluster.restart(master);
    await until('the old master to follow the new one', async () => /master_link_status:up/.test(await cli(master, 'info', 'replication')));
    failingOver = false;
    await others;

    // The client retries what was not acknowledged.
    if (!victim.parts.has(2)) victim.parts.set(2, { etag: await uploadPart(victim.key, victim.uploadId, 2, during), body: during });
    for (const u of uploads) {
      const parts = [...u.parts.entries()].sort(([a], [b]) => a - b);
      const res = await layer.dpFetch(
        'POST',
        `/internal/multipart/${bucket}/${u.key}/${u.uploadId}/complete`,
        JSON.stringify({ parts: parts.map(([partNumber, p]) => ({ partNumber, etag: p.etag })) }),
        json,
      );
      expect(res.status, `${u.key}: ${await res.clone().text()}`).to.equal(200);
      const got = Buffer.from(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/${u.key}`)).arrayBuffer());
      expect(got.equals(Buffer.concat(parts.map(([, p]) => p.body))), u.key).to.equal(true);
    }
  });
});
