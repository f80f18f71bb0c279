import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
  type S3ServiceException,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster } from 'ioredis';
import pg from 'pg';
import { CONTROL_PLANE_QUEUE } from '../../images/control-plane/src/events/consumer.js';
import { eventually, RabbitNames } from '../events/rabbitmq-fixture.js';
import { sharedPgReplica, type PgReplicaHarness } from '../support/pg-replica.js';
import { freePorts } from '../support/ports.js';
import { sharedRedisCluster, type RedisClusterHarness } from '../support/redis-cluster.js';
import { bucketName, sdkClient } from './support/s3.js';
import { productionServersEnv, replicatedDatabase } from './support/production.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROOT = { user: 'entryroot', password: 'entry-root-password' };

/** One service's container entrypoint (`images/<name>/src/main.ts`) as a child process. */
class ServiceProcess {
  child: ChildProcess | undefined;
  stderr = '';

  constructor(
    readonly name: string,
    readonly port: number,
    private readonly env: Record<string, string>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    // Only what this test sets: no STRATA_* of the developer's shell leaks in.
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('STRATA_'))) as Record<string, string>;
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repo, `images/${this.name}/src/main.ts`)], {
      cwd: repo,
      env: { ...base, LOG_LEVEL: 'warn', ...this.env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.on('data', (c: Buffer) => (this.stderr = (this.stderr + c.toString()).slice(-20_000)));
    this.child = child;
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`${this.name} exited with ${child.exitCode}: ${this.stderr}`);
        return fetch(`${this.url}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
      },
      `${this.name} to be ready`,
      60_000,
    );
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  async metrics(): Promise<string> {
    return (await fetch(`${this.url}/metrics`)).text();
  }
}

/**
 * The container entrypoints of the gateway, data plane and control plane select the production
 * adapters from the same env as `npm start`: PostgreSQL primary + replica, Redis Cluster, RabbitMQ.
 */
describe('e2e: service entrypoints on production servers, selected by env', function () {
  this.timeout(120_000);
  let pgh: PgReplicaHarness;
  let redis: RedisClusterHarness;
  let names: RabbitNames;
  let dbName: string;
  let db: pg.Pool;
  let dataDir: string;
  let services: ServiceProcess[] = [];
  let s3: S3Client;
  const keyPrefix = `e${randomBytes(4).toString('hex')}:`;

  before(async () => {
    [pgh, redis] = await Promise.all([sharedPgReplica(), sharedRedisCluster()]);
    dbName = `strata_entry_${randomBytes(4).toString('hex')}`;
    const dbUrl = await replicatedDatabase(pgh, dbName);
    db = new pg.Pool({ connectionString: dbUrl(pgh.primaryUrl), max: 2 });
    names = new RabbitNames();
    names.queue(CONTROL_PLANE_QUEUE);
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-entry-'));
    const rulesFile = path.join(dataDir, 'flow-rules.yaml');
    await writeFile(rulesFile, 'rateLimits:\n  routes:\n    ListBuckets: { points: 2, duration: 60 }\n');

    const [gwPort, dpPort, cpPort] = (await freePorts(3)) as [number, number, number];
    const shared = {
      STRATA_INTERNAL_TOKEN: randomBytes(16).toString('hex'),
      ...productionServersEnv(pgh, dbUrl, redis, keyPrefix, names),
      STRATA_PG_POOL_MAX: '3',
    };
    const cp = new ServiceProcess('control-plane', cpPort, {
      ...shared,
      PORT: String(cpPort),
      STRATA_SECRET_KEY: randomBytes(16).toString('hex'),
      STRATA_ROOT_USER: ROOT.user,
      STRATA_ROOT_PASSWORD: ROOT.password,
      STRATA_DATA_PLANE_URL: `http://127.0.0.1:${dpPort}`,
    });
    const dp = new ServiceProcess('data-plane', dpPort, { ...shared, PORT: String(dpPort), STRATA_DATA_DIR: dataDir, STRATA_OUTBOX_RETRY_MS: '500' });
    const gw = new ServiceProcess('gateway', gwPort, {
      ...shared,
      STRATA_GATEWAY_PORT: String(gwPort),
      STRATA_GATEWAY_HOST: '127.0.0.1',
      STRATA_CONTROL_PLANE_URL: cp.url,
      STRATA_DATA_PLANE_URL: dp.url,
      STRATA_JWT_SECRET: randomBytes(24).toString('hex'),
      STRATA_ROOT_USER: ROOT.user,
      STRATA_GATEWAY_RULES_FILE: rulesFile,
    });
    services = [cp, dp, gw];
    // The control plane creates the schema; the data plane is ready once it exists.
    await cp.start();
    await Promise.all([dp.start(), gw.start()]);
    s3 = sdkClient(gw.url, ROOT.user, ROOT.password);
  });

  after(async () => {
    s3?.destroy();
    for (const s of [...services].reverse()) await s.stop();
    await db?.end();
    await names?.cleanup().catch(() => undefined);
    if (pgh && dbName) {
      const admin = new pg.Client({ connectionString: pgh.primaryUrl });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    }
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('serves S3 with fresh reads, multipart state in the Redis Cluster and events through RabbitMQ', async () => {
    const [cp, dp] = services as [ServiceProcess, ServiceProcess];
    const bucket = bucketName('entry');
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    for (let i = 0; i < 5; i++) {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `k${i}`, Body: `v${i}` }));
      // Another process wrote it: the control plane's `latest` reads still see it at once.
      expect((await s3.send(new ListObjectsV2Command({ Bucket: bucket }))).KeyCount).to.equal(i + 1);
    }
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'k4' }));
    expect(await got.Body!.transformToString()).to.equal('v4');

    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'multi' }));
    const cluster = new Cluster(redis.nodes);
    try {
      await new Promise((resolve) => cluster.once('ready', resolve));
      expect(cluster.nodes('master')).to.have.length(3);
      const keys = (await Promise.all(cluster.nodes('master').map((n) => n.keys(`*${keyPrefix}strata:mpu:{${UploadId}}*`)))).flat();
      expect(keys, 'the upload state on the Redis Cluster').to.have.length(1);
    } finally {
      cluster.disconnect();
    }

    await eventually(async () => {
      const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM processed_events WHERE type = 'object.created'");
      return r.rows[0]!.n === 5;
    }, 'the object.created events to arrive through RabbitMQ');

    // The gateway's rate-limit counters live on the Redis Cluster (shared by every gateway replica).
    await s3.send(new ListBucketsCommand({}));
    await s3.send(new ListBucketsCommand({}));
    const refused = await s3.send(new ListBucketsCommand({})).then(
      () => undefined,
      (err: unknown) => err as S3ServiceException,
    );
    expect(refused?.name).to.equal('SlowDown');
    const counters = new Cluster(redis.nodes);
    try {
      await new Promise((resolve) => counters.once('ready', resolve));
      const keys = (await Promise.all(counters.nodes('master').map((n) => n.keys(`*${keyPrefix}strata:flow:*`)))).flat();
      expect(keys.length, 'rate-limit counters on the cluster').to.be.greaterThan(0);
    } finally {
      counters.disconnect();
    }
    expect(await services[2]!.metrics()).to.match(/^strata_gateway_rate_limit_rejections_total\{[^}]*route="ListBuckets"[^}]*\} 1$/m);

    const cpMetrics = await cp.metrics();
    expect(cpMetrics).to.match(/^strata_amqp_connected\{connection="strata-control-plane"[^}]*\} 1$/m);
    expect(cpMetrics).to.match(/^strata_sql_reads_total\{[^}]*\} [1-9]/m);
    const dpMetrics = await dp.metrics();
    expect(dpMetrics).to.match(/^strata_amqp_connected\{connection="strata-data-plane"[^}]*\} 1$/m);
    expect(dpMetrics).to.match(/^strata_multipart_uploads_in_flight\{[^}]*\} 1$/m);
  });

  it('the gateway answers repeated small GETs itself, and a write or delete through the other processes hides its copy at once', async () => {
    const gw = services[2]!;
    const hits = async () => Number(/^strata_cache_hits_total\{[^}]*cache="gateway-objects"[^}]*\} (\d+)$/m.exec(await gw.metrics())?.[1] ?? 0);
    const bucket = bucketName('answers');
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const read = async () => (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'k' }))).Body!.transformToString();
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'first' }));
    expect(await read()).to.equal('first');
    const before = await hits();
    expect(await read()).to.equal('first');
    expect(await hits(), 'answered by the gateway').to.equal(before + 1);
    // Written by the data plane process: its version token on the Redis Cluster changes before the PUT answers.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'second' }));
    expect(await read()).to.equal('second');
    expect(await read()).to.equal('second');
    // Deleted by the control plane process.
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'k' }));
    const gone = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'k' })).then(
      () => undefined,
      (err: unknown) => err as S3ServiceException,
    );
    expect(gone?.name).to.equal('NoSuchKey');
  });
});
