import { createHash, randomBytes } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { eventually } from './harness.js';
import { objectsSuite } from './objects-fixture.js';
import { internalPurge } from '../support/admin-jobs.js';

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

for (const inlineBlobBytes of [undefined, 0]) {
  describe(`data plane objects: blob sharing, copies, concurrency and events (PostgreSQL, ${inlineBlobBytes === 0 ? 'every body in a file' : 'small bodies inline'})`, function () {
    this.timeout(60_000);
    const fx = objectsSuite(inlineBlobBytes);
    const { newBucket, put, errorOf, blobFiles, tempFiles, rowCount, assertBlobInvariants } = fx;

    it('instant upload: a hit commits without the body, a miss stores it, another tenant never hits', async () => {
      const bucket = await newBucket('alice');
      const other = await newBucket('bob');
      const body = randomBytes(50_000);
      const hash = md5(body);
      // Miss: nothing stored yet; the body is read, hashed and stored.
      const miss = await put(bucket, 'first', body, { 'x-strata-instant-md5': hash });
      expect(((await miss.json()) as { instant: boolean }).instant).to.equal(false);
      const files = await blobFiles();
      // Hit: same owner, same (md5, size); the body sent is not even read (here: garbage of the right size).
      const hit = await put(bucket, 'second', Buffer.alloc(body.length), { 'x-strata-instant-md5': hash });
      const hitBody = (await hit.json()) as { instant: boolean; object: { etag: string; size: number } };
      expect(hitBody.instant).to.equal(true);
      expect(hitBody.object).to.include({ etag: hash, size: body.length });
      expect(await blobFiles()).to.deep.equal(files);
      const got = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/second`);
      expect(Buffer.from(await got.arrayBuffer()).equals(body)).to.equal(true);
      // Tenant bob claims the same hash: no hit; his lie about the content is caught.
      const lie = await put(other, 'stolen', Buffer.alloc(body.length), { 'x-strata-owner': 'bob', 'x-strata-instant-md5': hash });
      expect(await errorOf(lie)).to.deep.equal({ status: 400, code: 'BadDigest' });
      expect(await rowCount(other)).to.equal(0);
      // Bob uploading the real bytes is a miss, but the server-hashed content shares the one blob.
      const real = await put(other, 'mine', body, { 'x-strata-owner': 'bob', 'x-strata-instant-md5': hash });
      expect(((await real.json()) as { instant: boolean }).instant).to.equal(false);
      expect(await blobFiles()).to.deep.equal(files);
      // A wrong size is a miss too.
      const wrongSize = await put(bucket, 'third', body.subarray(1), { 'x-strata-instant-md5': hash });
      expect(await errorOf(wrongSize)).to.deep.equal({ status: 400, code: 'BadDigest' });
      const metrics = await (await fetch(`${fx.layer.dp.url}/metrics`)).text();
      expect(metrics).to.match(/strata_instant_uploads_total\{outcome="hit",service="data-plane"\} 1/);
    });

    it('GET of an object whose bytes are missing answers 503 saying so (never 500), and counts it for the operator', async () => {
      const bucket = await newBucket();
      const before = await blobFiles();
      expect((await put(bucket, 'lost', randomBytes(100_000))).status).to.equal(200);
      const file = path.join(fx.layer.dataDir, (await blobFiles()).find((f) => !before.includes(f))!);
      const bytes = await readFile(file);
      await rm(file);
      for (const range of [undefined, 'bytes=10-99999']) {
        const res = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/lost`, undefined, range ? { range } : {});
        const { error } = (await res.json()) as { error: { code: string; message: string } };
        expect({ status: res.status, code: error.code }).to.deep.equal({ status: 503, code: 'ServiceUnavailable' });
        expect(error.message).to.match(/data is not available/);
      }
      const metrics = await (await fetch(`${fx.layer.dp.url}/metrics`)).text();
      expect(metrics).to.match(/strata_missing_blob_reads_total\{service="data-plane"\} 2/);
      // Its bytes restored (a volume remounted, a backup), it reads again.
      await writeFile(file, bytes);
      const back = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/lost`);
      expect(Buffer.from(await back.arrayBuffer()).equals(bytes)).to.equal(true);
    });

    it('overwriting frees the old bytes once nothing references them', async () => {
      const bucket = await newBucket();
      const before = await blobFiles();
      await put(bucket, 'k', 'version one');
      const withOne = await blobFiles();
      expect(withOne.length).to.equal(before.length + 1);
      await put(bucket, 'k', 'version two');
      const withTwo = await blobFiles();
      expect(withTwo.length).to.equal(before.length + 1);
      expect(withTwo).to.not.deep.equal(withOne);
      expect(await (await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('version two');
    });

    it('the same content written over itself keeps its blob and its reference counts', async () => {
      const bucket = await newBucket();
      const blobOf = async () =>
        (
          await fx.layer.sql.query<{ id: number; ref_count: number }>(
            "SELECT b.id, b.ref_count FROM blobs b JOIN object_info o ON o.blob_id = b.id JOIN buckets k ON k.id = o.bucket_id WHERE k.name = $1 AND o.key = 'k' AND o.state = 'NORMAL'",
            [bucket],
          )
        ).rows[0];
      expect((await put(bucket, 'k', 'same bytes')).status).to.equal(200);
      const first = await blobOf();
      const files = await blobFiles();
      expect((await put(bucket, 'k', 'same bytes')).status).to.equal(200);
      const instant = await put(bucket, 'k', 'same bytes', { 'x-strata-instant-md5': md5('same bytes') });
      expect(((await instant.json()) as { instant: boolean }).instant).to.equal(true);
      expect(await blobOf()).to.deep.equal(first);
      expect(Number(first.ref_count)).to.equal(1);
      expect(await blobFiles()).to.deep.equal(files);
      expect(await rowCount(bucket)).to.equal(3); // two replaced versions (DELETED) and the current one
      expect(await (await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('same bytes');
    });

    it('conditional PUT: if-none-match * and if-match', async () => {
      const bucket = await newBucket();
      expect((await put(bucket, 'c', 'one', { 'if-none-match': '*' })).status).to.equal(200);
      expect(await errorOf(await put(bucket, 'c', 'two', { 'if-none-match': '*' }))).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
      expect(await errorOf(await put(bucket, 'c', 'two', { 'if-match': '"0123"' }))).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
      expect((await put(bucket, 'c', 'two', { 'if-match': `"${md5('one')}"` })).status).to.equal(200);
      expect(await tempFiles()).to.deep.equal([]);
    });

    it('CopyObject shares the blob on the same backend and applies the metadata directive', async () => {
      const bucket = await newBucket();
      const target = await newBucket('bob');
      await put(bucket, 'src', 'copy me', { 'content-type': 'text/plain', 'x-strata-meta': '{"a":"1"}' });
      const files = await blobFiles();
      const copy = await fx.layer.dpFetch(
        'POST',
        `/internal/objects/${target}/dst/copy`,
        JSON.stringify({ owner: 'bob', sourceBucket: bucket, sourceKey: 'src', metadataDirective: 'COPY' }),
        {
          'content-type': 'application/json',
        },
      );
      expect(copy.status).to.equal(200);
      expect(await copy.json()).to.include({ key: 'dst', etag: md5('copy me'), contentType: 'text/plain' });
      expect(await blobFiles()).to.deep.equal(files);
      const replaced = await fx.layer.dpFetch(
        'POST',
        `/internal/objects/${bucket}/src/copy`,
        JSON.stringify({ sourceBucket: bucket, sourceKey: 'src', metadataDirective: 'REPLACE', contentType: 'text/markdown', userMetadata: { b: '2' } }),
        { 'content-type': 'application/json' },
      );
      expect(await replaced.json()).to.deep.include({ contentType: 'text/markdown', userMetadata: { b: '2' } });
      const self = await fx.layer.dpFetch('POST', `/internal/objects/${bucket}/src/copy`, JSON.stringify({ sourceBucket: bucket, sourceKey: 'src' }), {
        'content-type': 'application/json',
      });
      expect(await errorOf(self)).to.deep.equal({ status: 400, code: 'InvalidRequest' });
      const failed = await fx.layer.dpFetch(
        'POST',
        `/internal/objects/${bucket}/x/copy`,
        JSON.stringify({ sourceBucket: bucket, sourceKey: 'src', conditions: { ifMatch: '"nope"' } }),
        {
          'content-type': 'application/json',
        },
      );
      expect(await errorOf(failed)).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
      // The blob is referenced by both objects: recycling and purging the source keeps the bytes.
      await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/src`);
      await internalPurge(fx.layer.cpFetch, { now: '2099-01-01T00:00:00Z' });
      expect(await (await fx.layer.dpFetch('GET', `/internal/objects/${target}/dst`)).text()).to.equal('copy me');
    });

    it('concurrent writers of one key leave one object and consistent blob references', async () => {
      const bucket = await newBucket();
      const bodies = ['content A', 'content B', 'content C'];
      const results = await Promise.all(Array.from({ length: 24 }, (_, i) => put(bucket, 'contended', bodies[i % 3])));
      expect(results.map((r) => r.status)).to.deep.equal(Array(24).fill(200));
      const live = await fx.layer.sql.query<{ etag: string }>(
        "SELECT o.etag FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 AND o.state = 'NORMAL'",
        [bucket],
      );
      expect(live.rows).to.have.length(1);
      const served = await (await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/contended`)).text();
      expect(md5(served)).to.equal(live.rows[0].etag);
      // The same content uploaded at once by many writers ends up as one blob.
      const same = await Promise.all(Array.from({ length: 6 }, (_, i) => put(bucket, `same-${i}`, 'identical bytes')));
      expect(same.map((r) => r.status)).to.deep.equal(Array(6).fill(200));
      const distinct = await fx.layer.sql.query<{ n: number }>(
        "SELECT count(DISTINCT o.blob_id)::int AS n FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 AND o.key LIKE 'same-%'",
        [bucket],
      );
      expect(Number(distinct.rows[0].n)).to.equal(1);
      await assertBlobInvariants();
    });

    it('writes object.created to the outbox in the commit and relays it to the broker', async () => {
      const bucket = await newBucket();
      await put(bucket, 'evented', 'payload');
      const rows = await fx.layer.sql.query<{ type: string; payload: { key: string; bucket: string } }>(
        "SELECT type, payload FROM outbox WHERE payload->>'bucket' = $1",
        [bucket],
      );
      expect(rows.rows.map((r) => [r.type, r.payload.key])).to.deep.include(['object.created', 'evented']);
      await eventually(async () => {
        const unsent = await fx.layer.sql.query("SELECT 1 FROM outbox WHERE sent_at IS NULL AND payload->>'bucket' = $1", [bucket]);
        expect(unsent.rows).to.have.length(0);
      });
    });
  });
}
