import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { expect } from 'chai';
import { injectSyncFault, pgliteWithSyncFaults, type SyncFault } from '../support/pglite-faults.js';
import { freshDirPerTest } from '../support/temp-dir.js';
import { enc, eventually, startObjectLayer, type ObjectLayer } from './harness.js';

/**
 * On PGlite a commit statement runs, and commits, on the database's thread before its answer waits for
 * the WAL sync. A sync that fails, or the thread ending meanwhile, leaves the outcome unknown: the bytes
 * the commit names must stay (they did not: the data plane took it as failed and deleted them, and the
 * row that came back after a restart pointed at nothing).
 */
describe('data plane on PGlite: a failed WAL sync or the end of its thread never costs a commit its bytes', function () {
  this.timeout(120_000);
  const tmp = freshDirPerTest('strata-pglite-unknown-');

  /** Quiet first: the bucket's event applied, so that the first statement to write (and sync) is the PUT's commit. */
  const quiet = (layer: ObjectLayer) =>
    eventually(async () => {
      const { rows } = await layer.sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM outbox o WHERE o.sent_at IS NULL OR NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.event_id = o.event_id)',
      );
      expect(rows[0]!.n).to.equal(0);
    });

  const cases: Array<[SyncFault, string]> = [
    ['fail', 'the WAL sync of the commit fails'],
    ['exit', 'the PGlite thread ends while the commit waits for its WAL sync'],
  ];
  for (const [fault, what] of cases) {
    it(`${what}: 503, the bytes stay, the data plane is not ready; opened again, the committed row names those bytes`, async () => {
      const layer = await startObjectLayer('pglite', { inlineBlobBytes: 0, pgliteSql: await pgliteWithSyncFaults(tmp.path) });
      const bucket = `pu-${randomBytes(4).toString('hex')}`;
      let kept: string[];
      try {
        expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
        const blobFiles = async () => (await layer.files()).filter((f) => f.startsWith('blobs/') && !f.startsWith('blobs/parts/')).map((f) => path.basename(f));
        await quiet(layer);
        const before = await blobFiles();
        await injectSyncFault(tmp.path, fault);
        const res = await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc('k')}`, randomBytes(100_000) as BodyInit, { 'x-strata-owner': 'alice' });
        expect(res.status, await res.text()).to.equal(503);
        kept = await blobFiles();
        expect(kept.length, 'the bytes of a commit whose outcome is unknown stay').to.equal(before.length + 1);
        // Stopped after the fault (PostgreSQL PANICs on a failed WAL sync): not ready until opened again.
        expect((await layer.dpFetch('GET', '/readyz')).status).to.equal(503);
      } finally {
        await layer.stop();
      }
      await injectSyncFault(tmp.path, 'none');
      const reopened = await pgliteWithSyncFaults(tmp.path);
      try {
        const { rows } = await reopened.query<{ locator: string }>(
          "SELECT b.locator FROM object_info o JOIN blobs b ON b.id = o.blob_id JOIN buckets k ON k.id = o.bucket_id WHERE k.name = $1 AND o.key = 'k' AND o.state = 'NORMAL'",
          [bucket],
        );
        expect(rows.length, 'the commit had run: its row is there after recovery').to.equal(1);
        expect(kept).to.include(rows[0]!.locator);
      } finally {
        await reopened.close();
      }
    });
  }
  it('the data plane is ready again by itself once its database was opened again: the commit of unknown outcome reads back, new writes commit', async () => {
    const layer = await startObjectLayer('pglite', {
      inlineBlobBytes: 0,
      pgliteSql: await pgliteWithSyncFaults(tmp.path, { reopenDelaysMs: { first: 100, max: 400 } }),
    });
    const bucket = `pr-${randomBytes(4).toString('hex')}`;
    try {
      expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
      const body = randomBytes(100_000);
      await quiet(layer);
      await injectSyncFault(tmp.path, 'fail');
      expect((await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc('k')}`, body as BodyInit, { 'x-strata-owner': 'alice' })).status).to.equal(503);
      expect((await layer.dpFetch('GET', '/readyz')).status).to.equal(503);
      await injectSyncFault(tmp.path, 'none');
      await eventually(async () => expect((await layer.dpFetch('GET', '/readyz')).status).to.equal(200), 'ready again', 30_000);
      const got = await layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('k')}`);
      expect(got.status).to.equal(200);
      expect(Buffer.from(await got.arrayBuffer()).equals(body)).to.equal(true);
      expect((await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc('k2')}`, 'after' as BodyInit, { 'x-strata-owner': 'alice' })).status).to.equal(200);
    } finally {
      await layer.stop();
    }
  });
});
