import { createHash, randomBytes } from 'node:crypto';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { startDataPlane } from '../../images/data-plane/src/app.js';
import { createLogger } from '../../images/service-kit/src/index.js';
import { TOKEN, startObjectLayer, type ObjectLayer } from './harness.js';

const MiB = 1024 * 1024;
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

describe('data plane multipart uploads (PostgreSQL)', function () {
  this.timeout(90_000);
  let layer: ObjectLayer;
  let bucket: string;

  before(async () => {
    layer = await startObjectLayer('postgres');
    bucket = `mpu-${randomBytes(4).toString('hex')}`;
    expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
  });
  after(async () => {
    await layer?.stop();
  });

  const json = { 'content-type': 'application/json' };
  const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });
  const initiate = async (key: string) => {
    const res = await layer.dpFetch(
      'POST',
      `/internal/multipart/${bucket}/${key}`,
      JSON.stringify({ owner: 'alice', contentType: 'video/mp4', userMetadata: { m: '1' } }),
      json,
    );
    expect(res.status).to.equal(200);
    return ((await res.json()) as { uploadId: string }).uploadId;
  };
  const uploadPart = async (key: string, uploadId: string, n: number, body: Buffer) => {
    const res = await layer.dpFetch('PUT', `/internal/multipart/${bucket}/${key}/${uploadId}/parts/${n}`, body as BodyInit);
    expect(res.status, await res.clone().text()).to.equal(200);
    return ((await res.json()) as { etag: string }).etag;
  };
  const complete = (key: string, uploadId: string, parts: Array<{ partNumber: number; etag: string }>) =>
    layer.dpFetch('POST', `/internal/multipart/${bucket}/${key}/${uploadId}/complete`, JSON.stringify({ parts }), json);
  const blobFiles = async () => (await layer.files()).filter((f) => f.startsWith('blobs/'));

  it('composes parts into one object with the multipart ETag and removes the part files', async () => {
    const before = await blobFiles();
    const uploadId = await initiate('movie');
    expect(uploadId).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const p1 = randomBytes(5 * MiB);
    const p2 = randomBytes(1234);
    const e2 = await uploadPart('movie', uploadId, 2, p2);
    const e1 = await uploadPart('movie', uploadId, 1, p1);
    expect([e1, e2]).to.deep.equal([md5(p1), md5(p2)]);
    expect((await blobFiles()).length).to.equal(before.length + 2);

    const listed = (await (await layer.dpFetch('GET', `/internal/multipart/${bucket}/movie/${uploadId}/parts`)).json()) as {
      parts: Array<{ partNumber: number; etag: string; size: number }>;
      owner: string;
    };
    expect(listed.parts.map((p) => [p.partNumber, p.etag, p.size])).to.deep.equal([
      [1, e1, p1.length],
      [2, e2, p2.length],
    ]);
    expect(listed.owner).to.equal('alice');
    const uploads = (await (await layer.dpFetch('GET', `/internal/multipart/${bucket}?prefix=mov`)).json()) as {
      uploads: Array<{ key: string; uploadId: string; owner: string }>;
    };
    expect(uploads.uploads.map((u) => [u.key, u.uploadId, u.owner])).to.deep.include(['movie', uploadId, 'alice']);

    const res = await complete('movie', uploadId, [
      { partNumber: 1, etag: `"${e1}"` },
      { partNumber: 2, etag: e2 },
    ]);
    expect(res.status, await res.clone().text()).to.equal(200);
    const meta = (await res.json()) as { etag: string; size: number; contentType: string; userMetadata: Record<string, string> };
    const expectedEtag = `${createHash('md5')
      .update(Buffer.concat([Buffer.from(e1, 'hex'), Buffer.from(e2, 'hex')]))
      .digest('hex')}-2`;
    expect(meta).to.deep.include({ etag: expectedEtag, size: p1.length + p2.length, contentType: 'video/mp4', userMetadata: { m: '1' } });
    const got = Buffer.from(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/movie`)).arrayBuffer());
    expect(got.equals(Buffer.concat([p1, p2]))).to.equal(true);
    // The part sizes are kept with the object: one part's bytes by its number (GetObject partNumber).
    const part2 = await layer.dpFetch('GET', `/internal/objects/${bucket}/movie?partNumber=2`);
    expect([part2.status, part2.headers.get('content-range'), part2.headers.get('x-amz-mp-parts-count')]).to.deep.equal([
      206,
      `bytes ${p1.length}-${p1.length + p2.length - 1}/${p1.length + p2.length}`,
      '2',
    ]);
    expect(Buffer.from(await part2.arrayBuffer()).equals(p2)).to.equal(true);
    expect(await errorOf(await layer.dpFetch('GET', `/internal/objects/${bucket}/movie?partNumber=3`))).to.deep.equal({
      status: 416,
      code: 'InvalidPartNumber',
    });
    // Only the composed blob remains: the part files are gone.
    expect((await blobFiles()).length).to.equal(before.length + 1);
    // A retried Complete (an SDK's retry) answers what the first one did (multipart-ownership.test.ts).
    const retried = await complete('movie', uploadId, [{ partNumber: 1, etag: e1 }]);
    expect([retried.status, ((await retried.json()) as { etag: string }).etag]).to.deep.equal([200, expectedEtag]);
  });

  it('rejects parts out of order, unknown or mismatched parts, and small non-last parts', async () => {
    const uploadId = await initiate('checked');
    const small1 = randomBytes(1000);
    const small2 = randomBytes(1000);
    const e1 = await uploadPart('checked', uploadId, 1, small1);
    const e2 = await uploadPart('checked', uploadId, 2, small2);
    const completeError = async (parts: Array<{ partNumber: number; etag: string }>) => errorOf(await complete('checked', uploadId, parts));
    expect(
      await completeError([
        { partNumber: 2, etag: e2 },
        { partNumber: 1, etag: e1 },
      ]),
    ).to.deep.equal({ status: 400, code: 'InvalidPartOrder' });
    expect(await completeError([{ partNumber: 3, etag: e1 }])).to.deep.equal({ status: 400, code: 'InvalidPart' });
    expect(await completeError([{ partNumber: 1, etag: e2 }])).to.deep.equal({ status: 400, code: 'InvalidPart' });
    expect(
      await completeError([
        { partNumber: 1, etag: e1 },
        { partNumber: 2, etag: e2 },
      ]),
    ).to.deep.equal({ status: 400, code: 'EntityTooSmall' });
    expect(await completeError([])).to.deep.equal({ status: 400, code: 'MalformedXML' });
    expect(await errorOf(await layer.dpFetch('PUT', `/internal/multipart/${bucket}/checked/${uploadId}/parts/0`, 'x'))).to.deep.equal({
      status: 400,
      code: 'InvalidArgument',
    });
    expect(await errorOf(await layer.dpFetch('PUT', `/internal/multipart/${bucket}/checked/${uploadId}/parts/10001`, 'x'))).to.deep.equal({
      status: 400,
      code: 'InvalidArgument',
    });
    // A single small part is fine: it is the last one.
    const ok = await complete('checked', uploadId, [{ partNumber: 2, etag: e2 }]);
    expect(ok.status).to.equal(200);
    expect(Buffer.from(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/checked`)).arrayBuffer()).equals(small2)).to.equal(true);
  });

  it('keeps upload and part state in the cache interface (no database row), and forgets it on complete', async () => {
    const uploadId = await initiate('cached');
    const state = await layer.cache.hgetall(`strata:mpu:{${uploadId}}`);
    expect(JSON.parse(state.info)).to.include({ owner: 'alice', contentType: 'video/mp4' });
    const e1 = await uploadPart('cached', uploadId, 1, randomBytes(100));
    expect(Object.keys(await layer.cache.hgetall(`strata:mpu:{${uploadId}}`)).sort()).to.deep.equal(['info', 'part:00001']);
    expect(
      (await layer.sql.query('SELECT 1 FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 AND o.key = $2', [bucket, 'cached'])).rows,
    ).to.have.length(0);
    expect((await complete('cached', uploadId, [{ partNumber: 1, etag: e1 }])).status).to.equal(200);
    expect(await layer.cache.hgetall(`strata:mpu:{${uploadId}}`)).to.deep.equal({});
    // Losing the cache entry loses the upload: the state is there and nowhere else.
    const second = await initiate('cached');
    await layer.cache.del(`strata:mpu:{${second}}`);
    expect(await errorOf(await layer.dpFetch('DELETE', `/internal/multipart/${bucket}/cached/${second}`))).to.deep.equal({ status: 404, code: 'NoSuchUpload' });
  });

  it('abort removes every part file; the upload is gone afterwards', async () => {
    const before = await blobFiles();
    const uploadId = await initiate('aborted');
    await uploadPart('aborted', uploadId, 1, randomBytes(2000));
    await uploadPart('aborted', uploadId, 2, randomBytes(2000));
    await uploadPart('aborted', uploadId, 2, randomBytes(3000)); // replacing a part removes the old bytes
    expect((await blobFiles()).length).to.equal(before.length + 2);
    expect((await layer.dpFetch('DELETE', `/internal/multipart/${bucket}/aborted/${uploadId}`)).status).to.equal(204);
    expect(await blobFiles()).to.deep.equal(before);
    expect(await errorOf(await layer.dpFetch('DELETE', `/internal/multipart/${bucket}/aborted/${uploadId}`))).to.deep.equal({
      status: 404,
      code: 'NoSuchUpload',
    });
    expect(await errorOf(await layer.dpFetch('PUT', `/internal/multipart/${bucket}/aborted/${uploadId}/parts/1`, 'x'))).to.deep.equal({
      status: 404,
      code: 'NoSuchUpload',
    });
    expect(await errorOf(await layer.dpFetch('GET', `/internal/multipart/${bucket}/aborted/not-an-id/parts`))).to.deep.equal({
      status: 404,
      code: 'NoSuchUpload',
    });
    const uploads = (await (await layer.dpFetch('GET', `/internal/multipart/${bucket}`)).json()) as { uploads: Array<{ uploadId: string }> };
    expect(uploads.uploads.map((u) => u.uploadId)).to.not.include(uploadId);
  });

  it('UploadPartCopy takes a byte range of an existing object', async () => {
    const source = randomBytes(6 * MiB);
    expect((await layer.dpFetch('PUT', `/internal/objects/${bucket}/source`, source as BodyInit, { 'x-strata-owner': 'alice' })).status).to.equal(200);
    const uploadId = await initiate('copied');
    const copyPart = (n: number, range?: string) =>
      layer.dpFetch(
        'PUT',
        `/internal/multipart/${bucket}/copied/${uploadId}/parts/${n}/copy`,
        JSON.stringify({ sourceBucket: bucket, sourceKey: 'source', range }),
        json,
      );
    const r1 = await copyPart(1, `bytes=0-${5 * MiB - 1}`);
    expect(r1.status, await r1.clone().text()).to.equal(200);
    const e1 = ((await r1.json()) as { etag: string }).etag;
    const e2 = ((await (await copyPart(2, `bytes=${5 * MiB}-${6 * MiB - 1}`)).json()) as { etag: string }).etag;
    expect(e1).to.equal(md5(source.subarray(0, 5 * MiB)));
    expect(await errorOf(await copyPart(3, `bytes=0-${6 * MiB}`))).to.deep.equal({ status: 416, code: 'InvalidRange' });
    expect(await errorOf(await copyPart(3, 'bytes=nonsense'))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
    const done = await complete('copied', uploadId, [
      { partNumber: 1, etag: e1 },
      { partNumber: 2, etag: e2 },
    ]);
    expect(done.status).to.equal(200);
    const got = Buffer.from(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/copied`)).arrayBuffer());
    expect(got.equals(source)).to.equal(true);
  });

  it('UploadPartCopy from a small object whose bytes are kept inline in the database', async () => {
    const small = randomBytes(1000);
    expect((await layer.dpFetch('PUT', `/internal/objects/${bucket}/small-source`, small as BodyInit, { 'x-strata-owner': 'alice' })).status).to.equal(200);
    const locator = await layer.sql.query<{ locator: string }>(
      "SELECT b.locator FROM blobs b JOIN object_info o ON o.blob_id = b.id WHERE o.key = 'small-source' AND o.state = 'NORMAL'",
    );
    expect(locator.rows[0]!.locator).to.match(/^i/);
    const uploadId = await initiate('from-inline');
    const part = await layer.dpFetch(
      'PUT',
      `/internal/multipart/${bucket}/from-inline/${uploadId}/parts/1/copy`,
      JSON.stringify({ sourceBucket: bucket, sourceKey: 'small-source', range: 'bytes=100-899' }),
      json,
    );
    expect(part.status, await part.clone().text()).to.equal(200);
    const etag = ((await part.json()) as { etag: string }).etag;
    expect(etag).to.equal(md5(small.subarray(100, 900)));
    expect((await complete('from-inline', uploadId, [{ partNumber: 1, etag }])).status).to.equal(200);
    const got = Buffer.from(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/from-inline`)).arrayBuffer());
    expect(got.equals(small.subarray(100, 900))).to.equal(true);
  });

  it('at start, removes crash-left temp files and the parts of uploads that expired unfinished', async () => {
    const uploadId = await initiate('left-behind');
    await uploadPart('left-behind', uploadId, 1, randomBytes(1000));
    const partFile = (await blobFiles()).find((f) => f.startsWith('blobs/parts/'))!;
    const tempFile = path.join(layer.dataDir, 'blobs', 'ab', 'cd', `${'a'.repeat(32)}.0000.tmp`);
    await mkdir(path.dirname(tempFile), { recursive: true });
    await writeFile(tempFile, 'half a blob');
    const longAgo = new Date(Date.now() - 9 * 24 * 3600 * 1000);
    await utimes(path.join(layer.dataDir, partFile), longAgo, longAgo);
    await utimes(tempFile, longAgo, longAgo);
    const fresh = await initiate('still-running');
    await uploadPart('still-running', fresh, 1, randomBytes(1000));

    await layer.dp.stop(1000);
    const restarted = await startDataPlane({
      port: 0,
      internalToken: TOKEN,
      dataDir: layer.dataDir,
      sql: layer.sql,
      logger: createLogger('test', 'silent'),
      blobSweepMs: 0,
    });
    try {
      const files = await layer.files();
      expect(files).to.not.include(partFile);
      expect(files.filter((f) => f.endsWith('.tmp'))).to.deep.equal([]);
      expect(files.filter((f) => f.startsWith('blobs/parts/'))).to.have.length(1);
    } finally {
      await restarted.stop(1000);
    }
  });
});
