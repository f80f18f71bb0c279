import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { BackendRegistry } from '../../images/data-plane/src/backends/registry.js';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import { BlobCollector } from '../../images/data-plane/src/gc/blob-collector.js';
import { CleanupJob } from '../../images/data-plane/src/gc/cleanup-job.js';
import { createLogger } from '../../images/service-kit/src/index.js';
import { startObjectLayer, type ObjectLayer } from './harness.js';

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

  before(async () => {
    layer = await startObjectLayer('postgres', { inlineBlobBytes: 0 }); // the job is about files
    fs = new FsBackend(layer.dataDir);
    const catalog = new Catalog(layer.sql);
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

  it('overlapping calls share one pass', async () => {
    const [a, b] = [job.runOnce(), job.runOnce()];
    expect(a).to.equal(b);
    await a;
  });
});
