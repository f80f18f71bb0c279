import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { BackendRegistry } from '../../images/data-plane/src/backends/registry.js';
import { Catalog, type CommitRequest } from '../../images/data-plane/src/catalog/catalog.js';
import { BlobCollector } from '../../images/data-plane/src/gc/blob-collector.js';
import { CleanupJob } from '../../images/data-plane/src/gc/cleanup-job.js';
import { S3Error } from '../../images/object-model/src/index.js';
import { createLogger, type SqlExecutor } from '../../images/service-kit/src/index.js';
import { eventually, startObjectLayer, type ObjectLayer } from './harness.js';

const HOUR = 3_600_000;

/**
 * The data plane's repair job on a real object layer (PostgreSQL): what a crash can leave behind is
 * removed once older than the grace; what may still belong to a request in flight, and every byte an
 * object references, stays.
 */
describe('data plane cleanup job (PostgreSQL)', function () {
  this.timeout(60_000);
  let layer: ObjectLayer;
  let job: CleanupJob;
  let fs: FsBackend;
  let catalog: Catalog;

  before(async () => {
    layer = await startObjectLayer('postgres', { inlineBlobBytes: 0 }); // the job is about files
    fs = new FsBackend(layer.dataDir);
    catalog = new Catalog(layer.sql);
    const logger = createLogger('test', 'silent');
    job = new CleanupJob(catalog, new BlobCollector(catalog, new BackendRegistry(fs), logger), [fs], logger, { partMaxAgeMs: 8 * 24 * HOUR });
  });
  after(async () => {
    await layer?.stop();
  });

  /** A file as a crash leaves it: `age` ms old. */
  async function leftover(rel: string, ageMs: number): Promise<string> {
    const p = path.join(layer.dataDir, 'blobs', rel);
    await mkdir(path.dirname(p), { recursive: true });
    await writeFile(p, randomBytes(100));
    const t = new Date(Date.now() - ageMs);
    await utimes(p, t, t);
    return `blobs/${rel}`;
  }
  const locator = () => randomBytes(16).toString('hex');
  const at = (l: string) => `${l.slice(0, 2)}/${l.slice(2, 4)}/${l}`;

  it('removes old temp files and blob files no row names; keeps young ones and every referenced blob', async () => {
    expect((await layer.cpFetch('PUT', '/internal/buckets/cleanup', { owner: 'alice' })).status).to.equal(200);
    const put = await layer.dpFetch('PUT', '/internal/objects/cleanup/kept', 'committed bytes', { 'x-strata-owner': 'alice' });
    expect(put.status).to.equal(200);
    const committed = (await layer.files()).filter((f) => /^blobs\/[0-9a-f]{2}\//.test(f));
    expect(committed).to.have.length(1);
    // Referenced bytes are never taken, however old.
    const old = new Date(Date.now() - 2 * HOUR);
    await utimes(path.join(layer.dataDir, committed[0]!), old, old);

    const oldOrphan = locator();
    const youngOrphan = locator();
    const files = {
      oldTemp: await leftover(`${at(locator())}.abcd1234.tmp`, 2 * HOUR),
      youngTemp: await leftover(`${at(locator())}.abcd1234.tmp`, 60_000),
      oldOrphan: await leftover(at(oldOrphan), 2 * HOUR),
      youngOrphan: await leftover(at(youngOrphan), 60_000),
      stranger: await leftover('ab/cd/not-a-blob.txt', 2 * HOUR),
    };

    const report = await job.runOnce();
    expect(report).to.include({ tempFiles: 1, orphanFiles: 1 });
    const after = await layer.files();
    expect(after).to.include.members([committed[0]!, files.youngTemp, files.youngOrphan, files.stranger]);
    expect(after).to.not.include.members([files.oldTemp]);
    expect(after).to.not.include(files.oldOrphan);
    const got = await layer.dpFetch('GET', '/internal/objects/cleanup/kept');
    expect(await got.text()).to.equal('committed bytes');
  });

  it('finishes freeing a blob whose freeing a crash interrupted (row left FREEING) and unreferenced rows', async () => {
    const stuck = locator();
    const unfreed = locator();
    await leftover(at(stuck), 0);
    await leftover(at(unfreed), 0);
    await layer.sql.query(
      `INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count, state) VALUES
       ('fs', '{"kind":"fs"}', $1, $3, 100, 0, 'FREEING'), ('fs', '{"kind":"fs"}', $2, $4, 100, 0, 'LIVE')`,
      [stuck, unfreed, randomBytes(16).toString('hex'), randomBytes(16).toString('hex')],
    );
    const report = await job.runOnce();
    expect(report.unreferencedBlobs).to.equal(2);
    const rows = await layer.sql.query('SELECT id FROM blobs WHERE locator = ANY($1::text[])', [[stuck, unfreed]]);
    expect(rows.rows).to.deep.equal([]);
    const left = (await layer.files()).map((f) => path.basename(f));
    expect(left).to.not.include(stuck);
    expect(left).to.not.include(unfreed);
  });

  /** A commit of a new blob file `locator` as `key` of bucket `fence` (a PUT whose file is written). */
  const commitOf = async (key: string, locator: string): Promise<CommitRequest> => ({
    bucket: await catalog.bucket('fence'),
    key,
    owner: 'alice',
    blob: { kind: 'new', backendKey: fs.key, backend: { kind: 'fs' }, locator, md5: null, size: 100 },
    etag: 'e',
    md5: null,
    size: 100,
    contentType: 'text/plain',
    userMetadata: {},
    now: new Date(),
  });
  /** Runs `hold` in a transaction of its own that stays open until the returned release is called. */
  async function holding(hold: (tx: SqlExecutor) => Promise<unknown>): Promise<() => Promise<void>> {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held!: () => void;
    const isHeld = new Promise<void>((resolve) => (held = resolve));
    const done = layer.sql.transaction(async (tx) => {
      await hold(tx);
      held();
      await released;
    });
    await isHeld;
    return async () => {
      release();
      await done;
    };
  }
  /** Waits until a strata_commit_objects statement waits for a lock. */
  const commitWaiting = () =>
    eventually(async () => {
      const waiting = await layer.sql.query(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%strata_commit_objects%' AND pid <> pg_backend_pid()",
      );
      expect(waiting.rows).to.have.length(1);
    });
  const blobRows = async (l: string) => (await layer.sql.query('SELECT id FROM blobs WHERE locator = $1', [l])).rows.length;
  const liveKey = async (key: string) =>
    (
      await layer.sql.query("SELECT 1 FROM object_info o JOIN buckets k ON k.id = o.bucket_id WHERE k.name = 'fence' AND o.key = $1 AND o.state = 'NORMAL'", [
        key,
      ])
    ).rows.length;

  it('a commit that resumes after the sweep took its file is refused (503), and no row points at the missing bytes', async () => {
    expect((await layer.cpFetch('PUT', '/internal/buckets/fence', { owner: 'alice' })).status).to.be.oneOf([200, 409]);
    const late = locator();
    const file = await leftover(at(late), 2 * HOUR); // written, its commit held past the grace
    const { id } = await catalog.bucket('fence');
    // The commit waits on its key's lock (as behind a frozen primary) before it touches any blob.
    const release = await holding((tx) => tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [id, 'late']));
    const commit = catalog.commitObject(await commitOf('late', late)).then(
      () => undefined,
      (err: unknown) => err,
    );
    try {
      await commitWaiting();
      await job.runOnce();
      expect(await layer.files()).to.not.include(file);
    } finally {
      await release();
    }
    const err = await commit;
    expect(err).to.be.instanceOf(S3Error);
    expect((err as S3Error).code).to.equal('ServiceUnavailable');
    expect(await blobRows(late)).to.equal(0);
    expect(await liveKey('late')).to.equal(0);
  });

  it('a sweep that meets a commit of its candidate in progress waits for it and keeps the file', async () => {
    expect((await layer.cpFetch('PUT', '/internal/buckets/fence', { owner: 'alice' })).status).to.be.oneOf([200, 409]);
    const first = locator();
    await leftover(at(first), 2 * HOUR);
    await catalog.commitObject(await commitOf('busy', first));
    const slow = locator();
    const file = await leftover(at(slow), 2 * HOUR);
    // The commit of `slow` takes its locator's lock, then waits for the row of the version it replaces.
    const release = await holding((tx) =>
      tx.query(
        "SELECT o.id FROM object_info o JOIN buckets k ON k.id = o.bucket_id WHERE k.name = 'fence' AND o.key = 'busy' AND o.state = 'NORMAL' FOR UPDATE OF o",
      ),
    );
    const commit = catalog.commitObject(await commitOf('busy', slow));
    let pass: Promise<unknown> | undefined;
    try {
      await commitWaiting();
      pass = job.runOnce();
      await eventually(async () => {
        const sweepWaits = await layer.sql.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock(l.h)%'");
        expect(sweepWaits.rows).to.have.length(1);
      });
    } finally {
      await release();
    }
    await commit;
    await pass;
    expect(await layer.files()).to.include(file);
    expect(await blobRows(slow)).to.equal(1);
    expect(await liveKey('busy')).to.equal(1);
  });

  it("forgets an orphan's fence once it is a week old, and none while a fenced file could not be deleted", async () => {
    const fenced = async () =>
      (
        await layer.sql.query<{ locator: string }>('SELECT locator FROM swept_locators WHERE locator = ANY($1::text[]) ORDER BY locator', [[old, young, stuck]])
      ).rows.map((r) => r.locator);
    const [old, young, stuck] = [locator(), locator(), locator()];
    await leftover(at(old), 2 * HOUR);
    await leftover(at(young), 2 * HOUR);
    await job.runOnce();
    // As the days pass (the rows' age, not a clock): `old` was fenced 8 days ago, `young` 6; `stuck` 8 days
    // ago by a pass whose deletion did not finish (its file is still there).
    const stuckFile = await leftover(at(stuck), 2 * HOUR);
    await layer.sql.query("INSERT INTO swept_locators (backend_key, locator) VALUES ('fs', $1)", [stuck]);
    const age = (l: string, days: number) => layer.sql.query(`UPDATE swept_locators SET swept_at = now() - interval '${days} days' WHERE locator = $1`, [l]);
    await age(old, 8);
    await age(young, 6);
    await age(stuck, 8);

    // A pass whose deletion fails forgets nothing.
    class FailingDeletes extends FsBackend {
      override async delete(l: string): Promise<void> {
        if (l === stuck) throw new Error('EIO');
        await super.delete(l);
      }
    }
    const logger = createLogger('test', 'silent');
    const failing = new CleanupJob(catalog, new BlobCollector(catalog, new BackendRegistry(fs), logger), [new FailingDeletes(layer.dataDir)], logger, {
      partMaxAgeMs: 8 * 24 * HOUR,
    });
    await failing.runOnce().then(
      () => expect.fail('the pass should fail'),
      () => undefined,
    );
    expect(await fenced()).to.deep.equal([old, young, stuck].sort());

    const report = await job.runOnce();
    expect(report.sweptLocatorsPruned).to.equal(2);
    expect(await fenced()).to.deep.equal([young]);
    expect(await layer.files()).to.not.include(stuckFile);
  });

  it('overlapping calls share one pass', async () => {
    const [a, b] = [job.runOnce(), job.runOnce()];
    expect(a).to.equal(b);
    await a;
  });
});
