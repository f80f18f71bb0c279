import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { productionSettings } from '../../images/service-kit/src/index.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';
import { OBJECT_STORE_SERVICES, startPlatform, type RunningPlatform } from '../../images/standalone/src/platform.js';
import { CONTROL_PLANE_QUEUE } from '../../images/control-plane/src/events/consumer.js';
import { BASELINE_VERSION } from '../../images/control-plane/src/schema/migrate.js';
import { eventually, RabbitNames } from '../events/rabbitmq-fixture.js';
import { startPgReplica, type PgReplicaHarness } from '../support/pg-replica.js';
import { startRedisCluster, type RedisClusterHarness } from '../support/redis-cluster.js';
import { ROOT_PASSWORD, ROOT_USER, JWT_SECRET } from './support/platform.js';
import { bucketName, md5Hex, sdkClient } from './support/s3.js';
import { productionServersEnv, replicatedDatabase } from './support/production.js';

const run = promisify(execFile);
const TOKEN = 'production-stack-internal-token-0123';

async function bodyOf(r: { Body?: unknown }): Promise<string> {
  return Buffer.from(await (r.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray()).toString();
}

/** One Prometheus sample value (summed over label sets matching `labels`), or undefined when absent. */
function sample(metrics: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let total: number | undefined;
  for (const line of metrics.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) total = (total ?? 0) + Number(m[4]);
  }
  return total;
}

/**
 * `npm start` on production servers: the standalone platform configured through the same env
 * variables as main.ts (STRATA_PG_URL + STRATA_PG_REPLICA_URLS, STRATA_REDIS_NODES, STRATA_AMQP_URL)
 * against a real PostgreSQL primary with a streaming replica, a private 3-master Redis Cluster and
 * the machine's RabbitMQ (exchange and queue names unique to this run, removed afterwards).
 */
describe('e2e: the object store on production servers (PostgreSQL primary + replica, Redis Cluster, RabbitMQ)', function () {
  this.timeout(120_000);
  let pgh: PgReplicaHarness;
  let redis: RedisClusterHarness;
  let names: RabbitNames;
  let dataDir: string;
  let platform: RunningPlatform;
  let s3: S3Client;
  let primary: pg.Pool;
  let replica: pg.Pool;
  const keyPrefix = `t${Math.random().toString(36).slice(2, 8)}:`;
  const bucket = bucketName('prod');

  before(async () => {
    [pgh, redis] = await Promise.all([startPgReplica(), startRedisCluster()]);
    const dbUrl = await replicatedDatabase(pgh, 'strata');
    primary = new pg.Pool({ connectionString: dbUrl(pgh.primaryUrl), max: 2 });
    replica = new pg.Pool({ connectionString: dbUrl(pgh.replicaUrl), max: 2 });
    replica.on('error', () => undefined); // idle connections die when the test stops the standby
    names = new RabbitNames();
    names.queue(CONTROL_PLANE_QUEUE); // declared by the platform as <prefix>.strata.control-plane; removed at the end
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-prod-'));

    // Exactly what `npm start` reads (images/standalone/src/main.ts).
    const env = loadStandaloneEnv({
      STRATA_DATA_DIR: dataDir,
      ...productionServersEnv(pgh, dbUrl, redis, keyPrefix, names),
      STRATA_PG_POOL_MAX: '6',
    });
    platform = await startPlatform(
      {
        dataDir,
        host: '127.0.0.1',
        ports: { gateway: 0, dataPlane: 0, controlPlane: 0 },
        rootUser: ROOT_USER,
        rootPassword: ROOT_PASSWORD,
        jwtSecret: JWT_SECRET,
        internalToken: TOKEN,
        purgeSchedule: false,
        logLevel: process.env.STRATA_E2E_LOG_LEVEL ?? 'silent',
        production: productionSettings(env),
      },
      OBJECT_STORE_SERVICES,
    );
    s3 = sdkClient(platform.urls.gateway);
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  });

  after(async () => {
    s3?.destroy();
    await platform?.stop();
    await primary?.end();
    await replica?.end();
    await names?.cleanup().catch(() => undefined);
    await Promise.all([pgh?.stop(), redis?.stop()]);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const scrape = async (service: string) => (await fetch(`${platform.urls[service]}/metrics`)).text();
  const internal = (service: string, p: string) => fetch(platform.urls[service] + p, { headers: { 'x-strata-internal-token': TOKEN } });

  it('creates its schema in the given PostgreSQL database (migrations applied at start), replicated to the standby', async () => {
    const versions = await primary.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(versions.rows.map((r) => r.version)).to.include(BASELINE_VERSION);
    await pgh.waitForReplay();
    const onReplica = await replica.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
    expect(onReplica.rows[0]!.n).to.equal(versions.rows.length);
    expect(existsSync(path.join(dataDir, 'pglite')), 'the embedded PGlite default is not used').to.equal(false);
  });

  it('answers LIST and GET right after each PUT (never stale), from the replica when it has caught up', async () => {
    const before = sample(await scrape('control-plane'), 'strata_sql_reads_total', { target: 'replica' }) ?? 0;
    for (let i = 0; i < 15; i++) {
      const key = `fresh/${i}`;
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: `body ${i}` }));
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'fresh/' }));
      expect(listed.KeyCount, `LIST right after PUT ${i}`).to.equal(i + 1);
      expect(await bodyOf(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })))).to.equal(`body ${i}`);
    }
    // Reads with nothing newer to cover (the replica has replayed everything) are served by it.
    await pgh.waitForReplay();
    for (let i = 0; i < 5; i++) await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'fresh/' }));
    const after = sample(await scrape('control-plane'), 'strata_sql_reads_total', { target: 'replica' }) ?? 0;
    expect(after, 'reads answered by the replica').to.be.greaterThan(before);
  });

  it('stays fresh while the replica lags (replay paused): reads that must see a write go to the primary', async () => {
    await pgh.pauseReplay();
    try {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'lag/one', Body: 'written while the replica lags' }));
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'lag/' }));
      expect(listed.Contents?.map((o) => o.Key)).to.deep.equal(['lag/one']);
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'lag/one' }));
      expect(head.ContentLength).to.equal('written while the replica lags'.length);
      // The standby itself has not seen the object: the answers above came from the primary.
      const onReplica = await replica.query("SELECT 1 FROM object_info WHERE key = 'lag/one'");
      expect(onReplica.rows).to.have.length(0);
    } finally {
      await pgh.resumeReplay();
    }
    const reads = await scrape('control-plane');
    expect(sample(reads, 'strata_sql_reads_total', { target: 'primary', reason: 'replica-behind' }) ?? 0).to.be.greaterThan(0);
  });

  it('puts object_info rows in the partition bucket_id % 2 names (checked on the replica)', async () => {
    const other = bucketName('prod-odd');
    await s3.send(new CreateBucketCommand({ Bucket: other }));
    await s3.send(new PutObjectCommand({ Bucket: other, Key: 'part', Body: 'x' }));
    await pgh.waitForReplay();
    const rows = await replica.query<{ part: string; bucket_id: number }>(
      `SELECT DISTINCT o.tableoid::regclass::text AS part, o.bucket_id FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = ANY($1)`,
      [[bucket, other]],
    );
    expect(new Set(rows.rows.map((r) => Number(r.bucket_id) % 2)).size, 'two consecutive buckets, both partitions').to.equal(2);
    for (const r of rows.rows) expect(r.part).to.equal(`object_info_p${Number(r.bucket_id) % 2}`);
  });

  it('keeps answering while the replica is down: its reads fall back to the primary', async () => {
    await pgh.stopReplica();
    try {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'down/one', Body: 'written while the replica is down' }));
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'down/' }));
      expect(listed.Contents?.map((o) => o.Key)).to.deep.equal(['down/one']);
      expect(await bodyOf(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'down/one' })))).to.equal('written while the replica is down');
    } finally {
      await pgh.startReplica();
    }
    const reads = await scrape('control-plane');
    const fellBack =
      (sample(reads, 'strata_sql_reads_total', { target: 'primary', reason: 'replica-failed' }) ?? 0) +
      (sample(reads, 'strata_sql_reads_total', { target: 'primary', reason: 'no-healthy-replica' }) ?? 0);
    expect(fellBack, "reads answered by the primary in the replica's place").to.be.greaterThan(0);
  });

  it('keeps multipart part state in the Redis Cluster, spread over all three masters', async () => {
    const masters = await Promise.all(
      redis.nodes.map(async (node) => {
        const client = new Redis({ host: node.host, port: node.port, lazyConnect: true });
        await client.connect();
        return client;
      }),
    );
    const uploadKeysOn = async (client: Redis): Promise<number> => {
      let cursor = '0';
      let n = 0;
      do {
        const [next, batch] = await client.scan(cursor, 'MATCH', `*${keyPrefix}strata:mpu:*`, 'COUNT', 1000);
        cursor = next;
        n += batch.length;
      } while (cursor !== '0');
      return n;
    };
    const uploads: Array<{ key: string; id: string }> = [];
    let perMaster: number[] = [];
    try {
      // Upload ids are random, so which master an upload's keys land on is too: a few batches of
      // three make every master hold some (missing one after 60 uploads: ~1e-10).
      while (uploads.length < 60) {
        for (let i = 0; i < 3; i++) {
          const key = `multi/${uploads.length}`;
          const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
          await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: `part of ${uploads.length}` }));
          uploads.push({ key, id: UploadId! });
        }
        perMaster = await Promise.all(masters.map(uploadKeysOn));
        if (uploads.length >= 6 && perMaster.every((n) => n > 0)) break;
      }
    } finally {
      for (const m of masters) m.disconnect();
    }
    expect(
      perMaster.every((n) => n > 0),
      `upload keys per master: ${perMaster.join(', ')}`,
    ).to.equal(true);
    expect(perMaster.reduce((a, b) => a + b, 0)).to.be.at.least(uploads.length);

    const first = uploads[0]!;
    const parts = [{ PartNumber: 1, ETag: `"${md5Hex('part of 0')}"` }];
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: first.key, UploadId: first.id, MultipartUpload: { Parts: parts } }));
    expect(await bodyOf(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: first.key })))).to.equal('part of 0');
    const metrics = await scrape('data-plane');
    expect(sample(metrics, 'strata_multipart_uploads_in_flight')).to.equal(uploads.length - 1);
  });

  it('delivers the recycle event of a DELETE through RabbitMQ to the control plane, once', async () => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'doomed', Body: 'soon recycled' }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'doomed' }));
    await eventually(async () => {
      const r = await primary.query<{ n: number }>("SELECT count(*)::int AS n FROM processed_events WHERE type = 'object.recycled'");
      return r.rows[0]!.n === 1;
    }, 'the object.recycled event to be consumed');
    // The relay marks the row sent once RabbitMQ confirmed it, which may come after the consumer applied the event.
    await eventually(async () => {
      const outbox = await primary.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE type = 'object.recycled' AND sent_at IS NOT NULL");
      return outbox.rows[0]!.n === 1;
    }, 'the outbox row to be confirmed by RabbitMQ');
    // The consumer's queue is the durable one named with this run's prefix, and it has been drained.
    await eventually(async () => (await names.readyCount(`${names.prefix}.${CONTROL_PLANE_QUEUE}`)) === 0, 'the queue to drain');
    const consumed = await scrape('control-plane');
    expect(sample(consumed, 'strata_events_consumed_total', { type: 'object.recycled', outcome: 'applied' })).to.equal(1);
    // Its side effect: the bucket's object count (kept by the consumer) matches the listing.
    const listed = (await s3.send(new ListObjectsV2Command({ Bucket: bucket }))).KeyCount;
    await eventually(async () => {
      const s = (await (await internal('control-plane', `/internal/buckets/${bucket}`)).json()) as { stats: { objectCount: number } };
      return s.stats.objectCount === listed;
    }, 'bucket stats to match the listing');
  });

  it('exposes Prometheus metrics in every service after traffic', async () => {
    const body = Buffer.from('instant content');
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'instant/a', Body: body }));
    const token = (
      (await (
        await fetch(`${platform.urls.gateway}/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: ROOT_USER, password: ROOT_PASSWORD }),
        })
      ).json()) as { data: { token: string } }
    ).data.token;
    const instant = await fetch(`${platform.urls.gateway}/${bucket}/instant/b`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'x-service-md5': md5Hex(body) },
      body,
    });
    expect(instant.status).to.equal(200);
    expect(((await instant.json()) as { data: { instant: boolean } }).data.instant).to.equal(true);

    const gateway = await scrape('gateway');
    expect(sample(gateway, 'http_requests_total', { route: 'PutObject', status: '200' }) ?? 0).to.be.greaterThan(0);
    expect(gateway).to.match(/^http_request_duration_seconds_bucket\{[^}]*route="ListObjectsV2"/m);
    expect(sample(gateway, 'strata_gateway_bytes_in_total') ?? 0).to.be.greaterThan(0);
    expect(sample(gateway, 'strata_gateway_bytes_out_total') ?? 0).to.be.greaterThan(0);
    expect(sample(gateway, 'strata_gateway_breaker_state', { upstream: 'data-plane' })).to.equal(0);
    expect(gateway).to.include('# TYPE strata_gateway_rate_limit_rejections_total counter');
    expect(sample(gateway, 'strata_cache_hits_total', { cache: 'gateway-buckets' }) ?? 0).to.be.greaterThan(0);
    expect(sample(gateway, 'strata_cache_misses_total', { cache: 'gateway-credentials' }) ?? 0).to.be.greaterThan(0);

    const dp = await scrape('data-plane');
    expect(sample(dp, 'strata_instant_uploads_total', { outcome: 'hit' })).to.equal(1);
    expect(sample(dp, 'strata_data_bytes_in_total') ?? 0).to.be.greaterThan(0);
    expect(sample(dp, 'strata_data_bytes_out_total') ?? 0).to.be.greaterThan(0);
    expect(sample(dp, 'strata_outbox_backlog')).to.be.a('number');
    expect(sample(dp, 'strata_cache_hits_total', { cache: 'data-plane' }) ?? 0).to.be.greaterThan(0);
    expect(sample(dp, 'http_requests_total') ?? 0).to.be.greaterThan(0);

    const cp = await scrape('control-plane');
    // The control plane reads bucket records from the database: the gateway's cache is the only one that
    // resolves bucket names (hack/adr/0007-bucket-resolution.md), so its own cache is not asked here.
    expect(sample(cp, 'strata_cache_hits_total', { cache: 'control-plane' }) ?? 0).to.equal(0);
    expect(sample(cp, 'http_request_duration_seconds_count') ?? 0).to.be.greaterThan(0);
    expect(sample(cp, 'strata_amqp_connected', { connection: 'strata-standalone' })).to.equal(1);
  });

  it('keeps serving from the database when a Redis Cluster master is down (cache outage degrades)', async () => {
    const victim = redis.nodes[1]!;
    await run('redis-cli', ['-h', victim.host, '-p', String(victim.port), 'shutdown', 'nosave']).catch(() => undefined);
    // Once the survivors mark the cluster failed (no replica can take over), every cache call fails.
    const survivor = redis.nodes[0]!;
    await eventually(async () => {
      const { stdout } = await run('redis-cli', ['-h', survivor.host, '-p', String(survivor.port), 'cluster', 'info']);
      return /cluster_state:fail/.test(stdout);
    }, 'the cluster to notice the lost master');
    const s3b = sdkClient(platform.urls.gateway);
    try {
      // Fresh bucket names: their lookups are not cached anywhere, so each one needs the cache or the database.
      for (let i = 0; i < 3; i++) {
        const b = bucketName(`outage${i}`);
        await s3b.send(new CreateBucketCommand({ Bucket: b }));
        await s3b.send(new PutObjectCommand({ Bucket: b, Key: 'k', Body: `during outage ${i}` }));
        expect(await bodyOf(await s3b.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).to.equal(`during outage ${i}`);
        const listed = await s3b.send(new ListObjectsV2Command({ Bucket: b }));
        expect(listed.Contents?.map((o) => o.Key)).to.deep.equal(['k']);
      }
      const buckets = await s3b.send(new ListBucketsCommand({}));
      expect(buckets.Buckets?.map((b) => b.Name)).to.include(bucket);
      // Multipart state lives only in the cache: a clean 503 the client retries, not a 500.
      const failure = await s3b.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'during-outage' })).then(
        () => undefined,
        (err: unknown) => err as S3ServiceException,
      );
      expect(failure?.name).to.equal('ServiceUnavailable');
      expect(failure?.$metadata.httpStatusCode).to.equal(503);
    } finally {
      s3b.destroy();
    }
    const dp = await scrape('data-plane');
    expect(sample(dp, 'strata_cache_unavailable_total', { cache: 'data-plane' }) ?? 0, 'cache calls that met the outage').to.be.greaterThan(0);
  });
});
