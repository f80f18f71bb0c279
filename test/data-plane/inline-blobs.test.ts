import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Readable } from 'node:stream';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import { enc, eventually, type ObjectLayer, rawPut, startObjectLayer } from './harness.js';
import { internalPurge } from '../support/admin-jobs.js';

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');
const md5b64 = (b: Buffer | string) => createHash('md5').update(b).digest('base64');

describe('data plane inline blobs (PostgreSQL, limit 1 KiB)', function () {
  this.timeout(60_000);
  let layer: ObjectLayer;

  before(async () => {
    layer = await startObjectLayer('postgres', { inlineBlobBytes: 1024 });
  });
  after(async () => {
    await layer?.stop();
  });

  const put = (bucket: string, key: string, body: Buffer | string, headers: Record<string, string> = {}) =>
    layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key)}`, body as BodyInit, { 'x-strata-owner': 'alice', ...headers });
  const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });
  const blobFileCount = async () => (await layer.files()).filter((f) => /^blobs\/[0-9a-f]{2}\//.test(f) && !f.endsWith('.tmp')).length;
  const blobOf = async (bucket: string, key: string) =>
    (
      await layer.sql.query<{ id: number; locator: string; ref_count: number; size: number; data: Buffer | null }>(
        `SELECT b.id, b.locator, b.ref_count, b.size, b.data FROM blobs b JOIN object_info o ON o.blob_id = b.id JOIN buckets k ON k.id = o.bucket_id
         WHERE k.name = $1 AND o.key = $2 AND o.state = 'NORMAL'`,
        [bucket, key],
      )
    ).rows[0];
  const newBucket = async (name: string, owner = 'alice') => expect((await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner })).status).to.equal(200);

  it('keeps bodies up to the limit in the blob row, not in a file; reads, ranges, copies and purge work on them', async () => {
    await newBucket('inline-a');
    await newBucket('inline-b', 'bob');
    const files = await blobFileCount();
    const small = randomBytes(1024);
    expect((await put('inline-a', 'small', small)).status).to.equal(200);
    const row = await blobOf('inline-a', 'small');
    expect(row.locator).to.match(/^i[0-9a-f]{32}$/);
    expect(Buffer.from(row.data!).equals(small)).to.equal(true);
    expect(await blobFileCount()).to.equal(files);
    // One byte over the limit, or a body of unknown length (chunked), goes to a file.
    const big = randomBytes(1025);
    expect((await put('inline-a', 'big', big)).status).to.equal(200);
    expect((await blobOf('inline-a', 'big')).data).to.equal(null);
    const chunked = await rawPut(`${layer.dp.url}/internal/objects/inline-a/chunked`, { 'x-strata-owner': 'alice', 'transfer-encoding': 'chunked' }, (req) =>
      req.end('tiny but of unknown length'),
    );
    expect(chunked).to.equal(200);
    expect((await blobOf('inline-a', 'chunked')).data).to.equal(null);
    expect(await blobFileCount()).to.equal(files + 2);

    const got = await layer.dpFetch('GET', '/internal/objects/inline-a/small');
    expect(got.headers.get('etag')).to.equal(`"${md5(small)}"`);
    expect(Buffer.from(await got.arrayBuffer()).equals(small)).to.equal(true);
    const range = await layer.dpFetch('GET', '/internal/objects/inline-a/small', undefined, { range: 'bytes=10-19' });
    expect(range.status).to.equal(206);
    expect(Buffer.from(await range.arrayBuffer()).equals(small.subarray(10, 20))).to.equal(true);

    // A copy shares the row; the bytes stay while either object references them.
    const copy = await layer.dpFetch(
      'POST',
      '/internal/objects/inline-b/dst/copy',
      JSON.stringify({ owner: 'bob', sourceBucket: 'inline-a', sourceKey: 'small', metadataDirective: 'COPY' }),
      {
        'content-type': 'application/json',
      },
    );
    expect(copy.status).to.equal(200);
    expect((await blobOf('inline-b', 'dst')).id).to.equal(row.id);
    expect(Number((await blobOf('inline-b', 'dst')).ref_count)).to.equal(2);
    expect((await put('inline-a', 'small', 'replaced')).status).to.equal(200);
    expect(Buffer.from(await (await layer.dpFetch('GET', '/internal/objects/inline-b/dst')).arrayBuffer()).equals(small)).to.equal(true);
    // Recycled and purged: the row that held the bytes is gone.
    expect((await layer.cpFetch('DELETE', '/internal/buckets/inline-b/objects/dst')).status).to.equal(204);
    const purged = await internalPurge(layer.cpFetch, { now: '2099-01-01T00:00:00Z' });
    expect(purged.freedBlobs).to.be.greaterThan(0);
    await eventually(async () => {
      expect((await layer.sql.query('SELECT 1 FROM blobs WHERE id = $1', [row.id])).rows).to.deep.equal([]);
    });
    expect((await layer.dpFetch('GET', '/internal/objects/inline-b/dst')).status).to.equal(404);
  });

  it('inline blobs stay readable once the limit is 0 (new bodies go to files again)', async () => {
    await newBucket('inline-off');
    const body = randomBytes(512);
    expect((await put('inline-off', 'k', body)).status).to.equal(200);
    const { locator } = await blobOf('inline-off', 'k');
    const catalog = new Catalog(layer.sql);
    const off: FsBackend = new FsBackend(layer.dataDir, { inline: { maxBytes: 0, load: (l) => catalog.inlineBlob(off.key, l) } });
    const chunks: Buffer[] = [];
    for await (const chunk of await off.get(locator)) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(body)).to.equal(true);
    expect(await off.exists(locator)).to.equal(true);
    const stored = await off.put(Readable.from([Buffer.from('new small body')]), { expectedSize: 14 });
    expect(stored.locator).to.match(/^[0-9a-f]{32}$/);
    expect(stored.inline).to.equal(undefined);
    expect(await off.exists(stored.locator)).to.equal(true);
    await off.delete(stored.locator);
  });

  it('a wrong Content-MD5 or a short body keeps nothing inline', async () => {
    await newBucket('inline-bad');
    const rows = async () => Number((await layer.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM blobs')).rows[0].n);
    const before = await rows();
    expect(await errorOf(await put('inline-bad', 'k', 'body', { 'x-strata-content-md5': md5b64('other') }))).to.deep.equal({ status: 400, code: 'BadDigest' });
    const short = await rawPut(`${layer.dp.url}/internal/objects/inline-bad/short`, { 'x-strata-owner': 'alice', 'content-length': '100' }, (req) => {
      req.write('only forty bytes of the hundred promised.');
      setTimeout(() => req.destroy(), 200);
    });
    expect(short).to.not.equal(200);
    expect(await rows()).to.equal(before);
    expect((await layer.sql.query("SELECT 1 FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = 'inline-bad'")).rows).to.deep.equal([]);
  });
});
