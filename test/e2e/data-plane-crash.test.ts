import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startControlPlane } from '../../images/control-plane/src/app.js';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { startGateway } from '../../images/gateway/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { freePort } from '../support/ports.js';
import { filesUnder } from '../support/temp-dir.js';
import { eventually } from '../support/eventually.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOKEN = 'crash-test-internal-token-0123456789';
const ROOT = { user: 'crashroot', password: 'crash-root-password' };
const quiet = createLogger('crash-test', process.env.STRATA_E2E_LOG_LEVEL ?? 'silent');
const WORKERS = 6;
const KEYS_PER_WORKER = 8; // a worker cycles over its keys, so later uploads overwrite earlier ones
const ACKS_BEFORE_KILL = 60;
const STALLED = 3;
/** Advisory locks in this test's database (pg_locks covers the whole, shared server). */
const ADVISORY_LOCKS =
  "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

interface Attempt {
  sha: string;
  size: number;
  /** true: answered 200; false: failed; undefined: no answer yet. */
  ok?: boolean;
}

/** The data plane's container entrypoint as a real child process, so that SIGKILL really kills it. */
class DataPlaneProcess {
  child: ChildProcess | undefined;
  stderr = '';

  constructor(private readonly env: Record<string, string>) {}

  async start(): Promise<void> {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('STRATA_'))) as Record<string, string>;
    this.stderr = '';
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'images/data-plane/src/main.ts')], {
      cwd: repo,
      env: { ...base, LOG_LEVEL: 'warn', ...this.env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.on('data', (c: Buffer) => (this.stderr = (this.stderr + c.toString()).slice(-20_000)));
    this.child = child;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`data plane exited with ${child.exitCode}: ${this.stderr}`);
      const ready = await fetch(`${this.url}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return;
      if (Date.now() > deadline) throw new Error(`data plane not ready: ${this.stderr}`);
      await sleep(100);
    }
  }

  get url(): string {
    return `http://127.0.0.1:${this.env.PORT}`;
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** Every file under `<dataDir>/blobs`, as paths relative to it. */
function blobTree(dataDir: string): Promise<string[]> {
  return filesUnder(path.join(dataDir, 'blobs'));
}

/**
 * The reliability test: `kill -9` of the data plane (a real process: its container
 * entrypoint on PostgreSQL) in the middle of concurrent S3 uploads through the gateway, restarted on
 * the same port and data dir. Every upload answered 200 must read back byte for byte, GET/LIST must
 * never show a partial object, and the leftovers of the crash (temp files of bodies that were
 * streaming, a blob file renamed into place whose commit never ran, unfreed replaced blobs) must be
 * gone after the data plane's cleanup job ran.
 */
describe('e2e: kill -9 of the data plane in the middle of uploads', function () {
  this.timeout(180_000);
  let db: TestDatabase;
  let work: string;
  let dataDir: string;
  let cp: RunningService;
  let gw: RunningService;
  let dp: DataPlaneProcess;
  let s3: S3Client;
  let admin: pg.Client;

  before(async () => {
    db = await createTestDatabase('strata_crash');
    work = await mkdtemp(path.join(os.tmpdir(), 'strata-crash-'));
    dataDir = path.join(work, 'data');
    admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    cp = await startControlPlane({
      port: 0,
      host: '127.0.0.1',
      internalToken: TOKEN,
      secretKey: 'crash-test-secret-key',
      rootUser: ROOT.user,
      rootPassword: ROOT.password,
      pgUrl: db.url,
      logger: quiet,
    });
    const dpPort = await freePort();
    // The periodic sweep runs every second after the restart (the first start never needs it).
    dp = new DataPlaneProcess({
      PORT: String(dpPort),
      STRATA_PG_URL: db.url,
      STRATA_INTERNAL_TOKEN: TOKEN,
      STRATA_DATA_DIR: dataDir,
      STRATA_BLOB_SWEEP_MS: '1000',
      // The test holds the held upload's commit lock until after the kill, however long the other
      // uploads take on a loaded machine: no statement or answer timeout may end that commit first
      // (a cancelled commit is a definite failure and its file is deleted, leaving no orphan to sweep).
      STRATA_PG_STATEMENT_TIMEOUT_MS: '0',
      STRATA_PG_QUERY_TIMEOUT_MS: '0',
    });
    await dp.start();
    // Breakers that close again soon after the data plane is back (the defaults wait 30 s), no upload timeout.
    const rules = path.join(work, 'rules.yaml');
    await writeFile(rules, 'breakers:\n  default: { timeout: 0, errorThresholdPercentage: 50, resetTimeout: 300, volumeThreshold: 10 }\n');
    gw = await startGateway({
      port: 0,
      host: '127.0.0.1',
      controlPlaneUrl: cp.url,
      dataPlaneUrl: dp.url,
      internalToken: TOKEN,
      jwtSecret: 'crash-test-jwt-secret-0123456789abcdef',
      rootUser: ROOT.user,
      flowRulesFile: rules,
      logger: quiet,
    });
    // (Not ./support/s3.js: it loads the whole standalone platform, which this test does not use.)
    s3 = new S3Client({
      endpoint: gw.url,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: ROOT.user, secretAccessKey: ROOT.password },
      maxAttempts: 1,
    });
  });

  after(async () => {
    s3?.destroy();
    await dp?.kill();
    await gw?.stop(500);
    await cp?.stop(500);
    await admin?.end().catch(() => undefined);
    await db?.drop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('loses no acknowledged object, shows no partial one, and cleans up what the crash left', async () => {
    const bucket = `crash-${randomBytes(4).toString('hex')}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const bucketId = Number((await admin.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [bucket])).rows[0]!.id);
    const attempts = new Map<string, Attempt[]>();
    let acked = 0;
    let crashed = false;

    // 1. Bodies still streaming when the process dies: the client sends part of the body and waits.
    const stalled: http.ClientRequest[] = [];
    for (let i = 0; i < STALLED; i++) {
      const url = presignUrl({
        method: 'PUT',
        origin: gw.url,
        path: `/${bucket}/stalled-${i}`,
        accessKey: ROOT.user,
        secret: ROOT.password,
        region: 'us-east-1',
        expiresSeconds: 600,
      });
      const req = http.request(url, { method: 'PUT', headers: { 'content-length': 1 << 20 } });
      req.on('error', () => undefined);
      req.on('response', (res) => res.resume());
      req.write(randomBytes(256 * 1024));
      stalled.push(req);
    }
    await eventually(
      async () => (await blobTree(dataDir)).filter((f) => f.endsWith('.tmp')).length >= STALLED,
      'the stalled bodies to be streaming into temp files',
    );

    // 2. A blob renamed into place whose commit waits: the test holds the key's commit lock.
    await admin.query('SELECT pg_advisory_lock($1::int, hashtext($2))', [bucketId, 'held/commit']);
    // (Above the 64 KiB kept inline in the database, so the blob is a file.)
    const held = s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'held/commit', Body: randomBytes(100_000) })).then(
      () => 'acknowledged',
      () => 'failed',
    );
    await eventually(
      async () => Number((await admin.query<{ n: number }>(`${ADVISORY_LOCKS} AND NOT granted`)).rows[0]!.n) > 0,
      'the held upload to wait for its commit lock',
    );

    // 3. Concurrent uploads (new keys and overwrites), and a reader checking what GET/LIST show meanwhile.
    const checkVisible = (key: string, body: Buffer, listedSize?: number) => {
      const tries = attempts.get(key);
      expect(tries, `unexpected key ${key}`).to.not.equal(undefined);
      const match = tries!.find((a) => a.sha === sha256(body));
      expect(match, `${key} shows bytes no upload sent (${body.length} bytes)`).to.not.equal(undefined);
      if (listedSize !== undefined) expect(listedSize).to.equal(body.length);
    };
    const readerChecks = { gets: 0 };
    const reader = (async () => {
      while (!crashed) {
        try {
          const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'w' }));
          const objects = listed.Contents ?? [];
          if (objects.length === 0) continue;
          const o = objects[Math.floor(Math.random() * objects.length)]!;
          const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key! }));
          const body = Buffer.from(await got.Body!.transformToByteArray());
          // The key may have been overwritten between LIST and GET: check the size only when the ETag matches.
          checkVisible(o.Key!, body, got.ETag === o.ETag ? o.Size : undefined);
          readerChecks.gets++;
        } catch (err) {
          if (err instanceof Error && err.name === 'AssertionError') throw err;
          await sleep(20); // the data plane is down: keep trying until the test stops us
        }
      }
    })();
    const worker = async (w: number) => {
      for (let n = 0; !crashed; n++) {
        const key = `w${w}/k${n % KEYS_PER_WORKER}`;
        const size = n % 7 === 0 ? 1_000_000 + Math.floor(Math.random() * 500_000) : 1 + Math.floor(Math.random() * 100_000);
        const body = randomBytes(size);
        const attempt: Attempt = { sha: sha256(body), size };
        attempts.set(key, [...(attempts.get(key) ?? []), attempt]);
        try {
          await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
          attempt.ok = true;
          acked++;
        } catch {
          attempt.ok = false;
          if (!crashed) await sleep(10);
        }
      }
    };
    const workers = Array.from({ length: WORKERS }, (_, w) => worker(w));
    await eventually(async () => acked >= ACKS_BEFORE_KILL, `${ACKS_BEFORE_KILL} acknowledged uploads`, 60_000);

    // 4. kill -9 in the middle of all that.
    await dp.kill();
    crashed = true;
    await Promise.all(workers);
    await reader;
    for (const req of stalled) req.destroy();
    expect(await held).to.equal('failed');
    expect(readerChecks.gets).to.be.greaterThan(0);

    const leftovers = await blobTree(dataDir);
    const tempFiles = leftovers.filter((f) => f.endsWith('.tmp'));
    expect(tempFiles.length, 'temp files of the bodies that were streaming').to.be.at.least(STALLED);
    // The killed process's commit still waits for the held lock. When the rest of the commit needs no
    // further word from the client (one statement, e.g. a server-side function), PostgreSQL runs it to
    // the end once the lock is free: the object then exists, which is allowed (only its answer was
    // lost). Here the server notices the dead client first, as client_connection_check_interval does:
    // the transaction is rolled back and its blob file is an orphan.
    await admin.query(
      `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    await admin.query('SELECT pg_advisory_unlock($1::int, hashtext($2))', [bucketId, 'held/commit']);
    await eventually(async () => Number((await admin.query<{ n: number }>(ADVISORY_LOCKS)).rows[0]!.n) === 0, 'the killed transactions to end');
    const known = new Set((await admin.query<{ locator: string }>('SELECT locator FROM blobs')).rows.map((r) => r.locator));
    const orphanFiles = leftovers.filter((f) => !f.endsWith('.tmp') && !known.has(path.basename(f)));
    expect(orphanFiles.length, 'blob files no row names (the held upload at least)').to.be.at.least(1);

    // 5. Time passes (the cleanup leaves files younger than its grace alone: they may belong to live
    // requests), then the data plane comes back on the same port and data dir.
    const hoursAgo = new Date(Date.now() - 2 * 3600_000);
    for (const f of leftovers) await utimes(path.join(dataDir, 'blobs', f), hoursAgo, hoursAgo);
    await dp.start();
    await eventually(
      async () => (await s3.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1 }))).$metadata.httpStatusCode === 200,
      'the gateway to reach the data plane again',
    );

    // 6. Every acknowledged upload reads back byte for byte (or a later upload of the key that
    // committed before the answer was lost); LIST shows only whole objects of keys that were sent.
    const listed = new Map<string, number>();
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
      for (const o of page.Contents ?? []) listed.set(o.Key!, o.Size!);
      token = page.NextContinuationToken;
    } while (token);
    let verified = 0;
    for (const [key, tries] of attempts) {
      const lastAck = tries.map((a) => a.ok).lastIndexOf(true);
      const allowed = tries.slice(Math.max(lastAck, 0)); // after the last acknowledged one, none was acknowledged
      if (!listed.has(key)) {
        expect(lastAck, `acknowledged object ${key} is missing`).to.equal(-1);
        continue;
      }
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      const body = Buffer.from(await got.Body!.transformToByteArray());
      expect(listed.get(key)).to.equal(body.length);
      expect(
        allowed.map((a) => a.sha),
        `${key}: the last acknowledged upload (or a later one) must be what GET shows`,
      ).to.include(sha256(body));
      if (lastAck >= 0) verified++;
    }
    expect(verified).to.be.greaterThan(0);
    for (const key of listed.keys()) expect(attempts.has(key), `LIST shows ${key}, which no completed upload wrote`).to.equal(true);
    expect([...listed.keys()].filter((k) => k.startsWith('stalled-') || k === 'held/commit')).to.deep.equal([]);

    // 7. The cleanup job (at start, then every second here) removes every leftover: no temp file, no
    // blob file without its row, no row without references; the rows' counts match the objects.
    await eventually(async () => {
      const files = await blobTree(dataDir);
      if (files.some((f) => f.endsWith('.tmp') || f.startsWith('parts/'))) return false;
      // Inline blobs (bodies up to 64 KiB) have no file: their bytes are in the row.
      const rows = (await admin.query<{ locator: string }>("SELECT locator FROM blobs WHERE backend_key = 'fs' AND data IS NULL")).rows
        .map((r) => r.locator)
        .sort();
      return JSON.stringify(files.map((f) => path.basename(f)).sort()) === JSON.stringify(rows);
    }, 'the cleanup job to remove the crash leftovers');
    const unreferenced = await admin.query("SELECT id FROM blobs WHERE ref_count = 0 OR state <> 'LIVE'");
    expect(unreferenced.rows).to.deep.equal([]);
    const mismatched = await admin.query(
      `SELECT b.id, b.ref_count, count(o.id) AS refs FROM blobs b LEFT JOIN object_info o ON o.blob_id = b.id AND o.state IN ('NORMAL', 'RECYCLED')
       GROUP BY b.id, b.ref_count HAVING b.ref_count <> count(o.id)`,
    );
    expect(mismatched.rows).to.deep.equal([]);
    const normal = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM object_info WHERE state = 'NORMAL'");
    expect(normal.rows[0]!.n).to.equal(listed.size);
    // Every version committed (current or overwritten) has its object.created event, and no event
    // exists without its version: object row and outbox row were committed together or not at all.
    const versions = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM object_info WHERE bucket_id = $1', [bucketId]);
    const events = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE type = 'object.created' AND payload->>'bucket' = $1", [
      bucket,
    ]);
    expect(events.rows[0]!.n).to.equal(versions.rows[0]!.n);

    // 8. And the restarted data plane takes new uploads, which the sweep leaves alone.
    const fresh = randomBytes(10_000);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'after-restart', Body: fresh }));
    await sleep(1500);
    const again = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'after-restart' }));
    expect(sha256(Buffer.from(await again.Body!.transformToByteArray()))).to.equal(sha256(fresh));
  });
});
