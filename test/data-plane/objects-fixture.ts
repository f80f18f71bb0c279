import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { enc, startObjectLayer, type ObjectLayer } from './harness.js';

/**
 * The object layer of a data-plane objects suite on PostgreSQL, started before the calling suite and
 * stopped after, with the helpers its tests share. After each passing test the blob invariants are checked.
 * `inlineBlobBytes`: the data plane's inline limit (0: every body in a file). Call inside `describe`.
 */
export function objectsSuite(inlineBlobBytes: number | undefined) {
  let layer: ObjectLayer;
  let seq = 0;

  before(async () => {
    layer = await startObjectLayer('postgres', { inlineBlobBytes });
  });
  after(async () => {
    await layer?.stop();
  });
  afterEach(async function () {
    if (this.currentTest?.state === 'passed') await assertBlobInvariants();
  });

  const newBucket = async (owner = 'alice'): Promise<string> => {
    const name = `dp-${++seq}-${randomBytes(3).toString('hex')}`;
    expect((await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner })).status).to.equal(200);
    return name;
  };
  const put = (bucket: string, key: string, body: Buffer | string, headers: Record<string, string> = {}) =>
    layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key).replace(/\./g, '%2E')}`, body as BodyInit, { 'x-strata-owner': 'alice', ...headers });
  const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });
  /** Stored blobs: their files, and the blob rows that hold their bytes inline (as `inline:<locator>`). */
  const blobFiles = async () => [
    ...(await layer.files()).filter((f) => f.startsWith('blobs/')),
    ...(await layer.sql.query<{ locator: string }>('SELECT locator FROM blobs WHERE data IS NOT NULL ORDER BY locator')).rows.map((r) => `inline:${r.locator}`),
  ];
  const tempFiles = async () => (await layer.files()).filter((f) => f.endsWith('.tmp'));
  const rowCount = async (bucket: string) =>
    Number(
      (await layer.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1', [bucket]))
        .rows[0].n,
    );

  /** Reference counts match the rows that reference each blob, and the files on disk are exactly the live blobs. */
  const assertBlobInvariants = async () => {
    const blobs = await layer.sql.query<{ id: number; locator: string; ref_count: number; refs: number }>(
      `SELECT b.id, b.locator, b.ref_count, (SELECT count(*)::int FROM object_info o WHERE o.blob_id = b.id AND o.state <> 'DELETED') AS refs FROM blobs b`,
    );
    for (const b of blobs.rows) {
      expect(Number(b.ref_count), `blob ${b.id}`).to.equal(Number(b.refs));
      expect(Number(b.ref_count), `blob ${b.id} should have been freed`).to.be.greaterThan(0);
    }
    const owners = await layer.sql.query<{ blob_id: number; owner: string; ref_count: number; refs: number }>(
      `SELECT w.blob_id, w.owner, w.ref_count,
         (SELECT count(*)::int FROM object_info o WHERE o.blob_id = w.blob_id AND o.owner = w.owner AND o.state <> 'DELETED') AS refs FROM blob_owners w`,
    );
    for (const w of owners.rows) expect(Number(w.ref_count), `blob ${w.blob_id} owner ${w.owner}`).to.equal(Number(w.refs));
    const onDisk = (await layer.files()).filter((f) => f.startsWith('blobs/') && !f.startsWith('blobs/parts/')).map((f) => f.split('/').pop()!);
    const inline = await layer.sql.query<{ locator: string; size: number; length: number }>(
      'SELECT locator, size, length(data) AS length FROM blobs WHERE data IS NOT NULL',
    );
    expect(onDisk.sort()).to.deep.equal(
      blobs.rows
        .map((b) => b.locator)
        .filter((l) => !l.startsWith('i'))
        .sort(),
    );
    for (const b of inline.rows) expect(Number(b.length), `inline blob ${b.locator}`).to.equal(Number(b.size));
    expect(inline.rows.map((b) => b.locator).sort()).to.deep.equal(
      blobs.rows
        .map((b) => b.locator)
        .filter((l) => l.startsWith('i'))
        .sort(),
    );
    if (inlineBlobBytes === 0) expect(inline.rows).to.deep.equal([]);
  };

  return {
    get layer(): ObjectLayer {
      return layer;
    },
    newBucket,
    put,
    errorOf,
    blobFiles,
    tempFiles,
    rowCount,
    assertBlobInvariants,
  };
}
