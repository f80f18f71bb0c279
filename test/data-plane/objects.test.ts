import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { expect } from 'chai';
import { enc, eventually, rawPut, startObjectLayer, type ObjectLayer } from './harness.js';
import { httpExchange } from '../support/http.js';

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');
const md5b64 = (b: Buffer | string) => createHash('md5').update(b).digest('base64');

for (const inlineBlobBytes of [undefined, 0]) {
  describe(`data plane objects (PostgreSQL, ${inlineBlobBytes === 0 ? 'every body in a file' : 'small bodies inline'})`, function () {
    this.timeout(60_000);
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
      ...(await layer.sql.query<{ locator: string }>('SELECT locator FROM blobs WHERE data IS NOT NULL ORDER BY locator')).rows.map(
        (r) => `inline:${r.locator}`,
      ),
    ];
    const tempFiles = async () => (await layer.files()).filter((f) => f.endsWith('.tmp'));
    const rowCount = async (bucket: string) =>
      Number(
        (await layer.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1', [bucket]))
          .rows[0].n,
      );

    it('stores and serves an object with its type, metadata and ETag; range reads', async () => {
      const bucket = await newBucket();
      const body = randomBytes(100_000);
      const res = await put(bucket, 'dir/file.bin', body, {
        'content-type': 'application/x-test',
        'x-strata-meta': JSON.stringify({ color: 'blue', note: 'café' }),
      });
      expect(res.status).to.equal(200);
      const { object, instant } = (await res.json()) as { object: Record<string, unknown>; instant: boolean };
      expect(instant).to.equal(false);
      expect(object).to.include({ bucket, key: 'dir/file.bin', size: body.length, etag: md5(body), md5: md5(body), contentType: 'application/x-test' });
      expect(object.userMetadata).to.deep.equal({ color: 'blue', note: 'café' });

      const get = await layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`);
      expect(get.status).to.equal(200);
      expect(get.headers.get('etag')).to.equal(`"${md5(body)}"`);
      expect(get.headers.get('content-type')).to.equal('application/x-test');
      expect(JSON.parse(get.headers.get('x-strata-meta')!)).to.deep.equal({ color: 'blue', note: 'café' });
      expect(Buffer.from(await get.arrayBuffer()).equals(body)).to.equal(true);

      const head = await layer.dpFetch('HEAD', `/internal/objects/${bucket}/${enc('dir/file.bin')}`);
      expect(head.status).to.equal(200);
      expect(head.headers.get('content-length')).to.equal(String(body.length));

      const range = await layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { range: 'bytes=10-19' });
      expect(range.status).to.equal(206);
      expect(range.headers.get('content-range')).to.equal(`bytes 10-19/${body.length}`);
      expect(Buffer.from(await range.arrayBuffer()).equals(body.subarray(10, 20))).to.equal(true);
      const suffix = await layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { range: 'bytes=-5' });
      expect(Buffer.from(await suffix.arrayBuffer()).equals(body.subarray(body.length - 5))).to.equal(true);
      const bad = await layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { range: `bytes=${body.length}-` });
      expect(await errorOf(bad)).to.deep.equal({ status: 416, code: 'InvalidRange' });
      const notModified = await layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { 'if-none-match': `"${md5(body)}"` });
      expect(notModified.status).to.equal(304);
      expect(await errorOf(await layer.dpFetch('GET', `/internal/objects/${bucket}/nope`))).to.deep.equal({ status: 404, code: 'NoSuchKey' });
      expect(await errorOf(await layer.dpFetch('GET', `/internal/objects/no-such-bucket-x/k`))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
    });

    it('Content-MD5 mismatch is BadDigest and leaves no file and no row', async () => {
      const bucket = await newBucket();
      const before = await blobFiles();
      const res = await put(bucket, 'k', 'some bytes', { 'x-strata-content-md5': md5b64('other bytes') });
      expect(await errorOf(res)).to.deep.equal({ status: 400, code: 'BadDigest' });
      expect(await blobFiles()).to.deep.equal(before);
      expect(await rowCount(bucket)).to.equal(0);
      const ok = await put(bucket, 'k', 'some bytes', { 'x-strata-content-md5': md5b64('some bytes') });
      expect(ok.status).to.equal(200);
      expect(await errorOf(await put(bucket, 'k2', 'x', { 'x-strata-content-md5': 'not-base64!' }))).to.deep.equal({ status: 400, code: 'InvalidDigest' });
    });

    it('a client that aborts mid-upload leaves no temp file and no row', async () => {
      const bucket = await newBucket();
      const before = await blobFiles();
      let sawTemp = false;
      await new Promise<void>((resolve) => {
        const url = new URL(`${layer.dp.url}/internal/objects/${bucket}/aborted`);
        const req = http.request(url, {
          method: 'PUT',
          headers: { 'x-strata-internal-token': 'test-internal-token-0123456789', 'content-length': String(10 * 1024 * 1024) },
        });
        req.on('error', () => resolve());
        req.write(randomBytes(256 * 1024));
        // Abort only once the upload is really streaming into its temp file.
        eventually(async () => {
          expect(await tempFiles()).to.have.length(1);
        }).then(
          () => {
            sawTemp = true;
            req.destroy();
            resolve();
          },
          () => {
            req.destroy();
            resolve();
          },
        );
      });
      await eventually(async () => {
        expect(await tempFiles()).to.deep.equal([]);
        expect(await blobFiles()).to.deep.equal(before);
      });
      expect(await rowCount(bucket)).to.equal(0);
      expect(sawTemp, 'the upload had started streaming').to.equal(true);
    });

    it('a body shorter than its Content-Length is IncompleteBody and stores nothing', async () => {
      const bucket = await newBucket();
      const before = await blobFiles();
      // fetch sets Content-Length itself; a raw request can lie about it and end early.
      const status = await rawPut(`${layer.dp.url}/internal/objects/${bucket}/short`, { 'content-length': '100', 'transfer-encoding': '' }, (req) => {
        req.write('x'.repeat(10));
        req.socket?.end();
        setTimeout(() => req.destroy(), 500);
      });
      expect([0, 400]).to.include(status);
      await eventually(async () => {
        expect(await tempFiles()).to.deep.equal([]);
        expect(await blobFiles()).to.deep.equal(before);
      });
      expect(await rowCount(bucket)).to.equal(0);
    });

    /** A chunked PUT whose length travels as x-strata-content-length and whose end carries `trailers` (as the gateway sends a body checked against a trailer checksum). */
    const trailedPut = (bucket: string, key: string, body: Buffer, declared: number, trailers: Record<string, string>, headers: Record<string, string> = {}) =>
      httpExchange(
        `${layer.dp.url}/internal/objects/${bucket}/${key}`,
        {
          method: 'PUT',
          headers: {
            'x-strata-internal-token': 'test-internal-token-0123456789',
            'x-strata-owner': 'alice',
            'x-strata-content-length': String(declared),
            trailer: Object.keys(trailers).join(', '),
            ...headers,
          },
        },
        body,
        trailers,
      );

    it('keeps stored headers sent ahead (x-strata-headers) and after the body (a trailer), answers them on GET and HEAD', async () => {
      const bucket = await newBucket();
      const ahead = { 'cache-control': 'max-age=60', 'content-encoding': 'gzip' };
      expect((await put(bucket, 'ahead.bin', 'bytes', { 'x-strata-headers': JSON.stringify(ahead) })).status).to.equal(200);
      for (const method of ['GET', 'HEAD'] as const) {
        const r = await layer.dpFetch(method, `/internal/objects/${bucket}/ahead.bin`);
        expect(JSON.parse(r.headers.get('x-strata-headers')!), method).to.deep.equal(ahead);
      }
      const body = randomBytes(3000);
      const checksum = { 'x-amz-checksum-sha256': createHash('sha256').update(body).digest('base64'), 'x-amz-checksum-type': 'FULL_OBJECT' };
      const r = await trailedPut(
        bucket,
        'trailed.bin',
        body,
        body.length,
        { 'x-strata-trailing-headers': JSON.stringify(checksum) },
        { 'x-strata-headers': JSON.stringify({ 'content-language': 'fr' }) },
      );
      expect(r.status, r.body).to.equal(200);
      const got = await layer.dpFetch('GET', `/internal/objects/${bucket}/trailed.bin`);
      expect(JSON.parse(got.headers.get('x-strata-headers')!)).to.deep.equal({ 'content-language': 'fr', ...checksum });
      expect(Buffer.from(await got.arrayBuffer()).equals(body)).to.equal(true);
      // Without any: no header at all.
      expect((await put(bucket, 'none.bin', 'x')).status).to.equal(200);
      expect((await layer.dpFetch('HEAD', `/internal/objects/${bucket}/none.bin`)).headers.get('x-strata-headers')).to.equal(null);
    });

    it('refuses stored headers it does not keep, malformed ones and a chunked body of the wrong length: nothing stored, no file left', async () => {
      const bucket = await newBucket();
      const before = await blobFiles();
      for (const headers of [JSON.stringify({ 'x-custom': '1' }), '{not json', JSON.stringify(['cache-control']), JSON.stringify({ 'cache-control': 7 })]) {
        expect(await errorOf(await put(bucket, 'bad.bin', 'x', { 'x-strata-headers': headers })), headers).to.deep.equal({
          status: 400,
          code: 'InvalidArgument',
        });
      }
      const body = Buffer.from('trailed bytes');
      const badTrailer = await trailedPut(bucket, 'bad-trailer.bin', body, body.length, { 'x-strata-trailing-headers': '{"x-amz-checksum-crc32":' });
      expect([badTrailer.status, JSON.parse(badTrailer.body).error.code]).to.deep.equal([400, 'InvalidArgument']);
      const short = await trailedPut(bucket, 'short.bin', body, body.length + 5, { 'x-strata-trailing-headers': '{}' });
      expect(short.status).to.equal(400);
      const long = await trailedPut(bucket, 'long.bin', body, body.length - 5, { 'x-strata-trailing-headers': '{}' });
      expect(long.status).to.equal(400);
      await eventually(async () => {
        expect(await tempFiles()).to.deep.equal([]);
        expect(await blobFiles()).to.deep.equal(before);
      });
      expect(await rowCount(bucket)).to.equal(0);
    });

    it('a Content-Length above 5 GiB is EntityTooLarge before any byte is stored', async () => {
      const bucket = await newBucket();
      const before = await blobFiles();
      const answer = await new Promise<{ status: number; body: string; connection?: string }>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: layer.dp.port,
            path: `/internal/objects/${bucket}/huge`,
            method: 'PUT',
            headers: { 'x-strata-internal-token': 'test-internal-token-0123456789', 'content-length': String(6 * 1024 ** 3) },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection }));
          },
        );
        req.on('error', reject);
        req.write(randomBytes(1024));
      });
      expect(answer.status).to.equal(400);
      expect(JSON.parse(answer.body).error.code).to.equal('EntityTooLarge');
      expect(answer.connection).to.equal('close');
      expect(await blobFiles()).to.deep.equal(before);
      expect(await rowCount(bucket)).to.equal(0);
    });

    it('rejects bad keys and oversized metadata', async () => {
      const bucket = await newBucket();
      expect(await errorOf(await put(bucket, 'a/../b', 'x'))).to.deep.equal({ status: 400, code: 'InvalidObjectName' });
      // fetch (WHATWG URL) drops a `..` segment even when percent-encoded; node:http sends the path as is.
      const dotDot = await httpExchange(
        layer.dp.url,
        { method: 'PUT', path: `/internal/objects/${bucket}/%2E%2E`, headers: { 'x-strata-internal-token': 'test-internal-token-0123456789' } },
        'x',
      );
      expect(dotDot.status, dotDot.body).to.equal(400);
      expect(JSON.parse(dotDot.body).error.code).to.equal('InvalidObjectName');
      expect(await errorOf(await put(bucket, 'nul\0key', 'x'))).to.deep.equal({ status: 400, code: 'InvalidObjectName' });
      expect(await errorOf(await put(bucket, 'k'.repeat(1025), 'x'))).to.deep.equal({ status: 400, code: 'KeyTooLongError' });
      expect(await errorOf(await put(bucket, 'é'.repeat(513), 'x'))).to.deep.equal({ status: 400, code: 'KeyTooLongError' });
      expect((await put(bucket, 'k'.repeat(1024), 'x')).status).to.equal(200);
      expect(await errorOf(await put(bucket, 'meta', 'x', { 'x-strata-meta': JSON.stringify({ big: 'v'.repeat(2100) }) }))).to.deep.equal({
        status: 400,
        code: 'MetadataTooLarge',
      });
      expect(await errorOf(await put(bucket, 'meta', 'x', { 'x-strata-meta': '{oops' }))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      expect(await errorOf(await put(bucket, 'meta', 'x', { 'x-strata-meta': '["a"]' }))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      expect(await errorOf(await put(bucket, 'tags', 'x', { 'x-strata-tags': '[{"key":' }))).to.deep.equal({ status: 400, code: 'InvalidTag' });
      expect(await errorOf(await put(bucket, 'tags', 'x', { 'x-strata-tags': '{"key":"k"}' }))).to.deep.equal({ status: 400, code: 'InvalidTag' });
      expect(await errorOf(await put(bucket, 'hdrs', 'x', { 'x-strata-headers': 'not json' }))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      expect(await errorOf(await put('no-such-bucket-y', 'k', 'x'))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      expect(await rowCount(bucket)).to.equal(1);
    });

    it('a bucket deleted after a write looked it up: the next write answers NoSuchBucket and leaves nothing; one after the bucket is created again lands in the new bucket', async () => {
      const bucket = await newBucket();
      // A refused write still looks the bucket up (and keeps its record for a moment).
      expect(await errorOf(await put(bucket, 'k', 'one', { 'x-strata-content-md5': md5b64('other') }))).to.deep.equal({ status: 400, code: 'BadDigest' });
      expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      const before = await blobFiles();
      expect(await errorOf(await put(bucket, 'k', 'one'))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      expect(await blobFiles()).to.deep.equal(before);
      expect(await tempFiles()).to.deep.equal([]);
      expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
      expect((await put(bucket, 'k', 'two')).status).to.equal(200);
      expect(await rowCount(bucket)).to.equal(1);
      expect(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('two');
    });

    it('a bucket deleted and created again by its owner while the data plane still holds the old record: the next write lands in the new bucket', async () => {
      const bucket = await newBucket();
      expect((await put(bucket, 'k', 'one')).status).to.equal(200); // the record (old id) is kept for a moment
      expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/k`)).status).to.equal(204);
      expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
      const res = await put(bucket, 'k', 'two');
      expect(res.status, await res.text()).to.equal(200);
      expect(await rowCount(bucket)).to.equal(1);
      expect(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('two');
      expect(await tempFiles()).to.deep.equal([]);
    });

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
      const got = await layer.dpFetch('GET', `/internal/objects/${bucket}/second`);
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
      const metrics = await (await fetch(`${layer.dp.url}/metrics`)).text();
      expect(metrics).to.match(/strata_instant_uploads_total\{outcome="hit",service="data-plane"\} 1/);
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
      expect(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('version two');
    });

    it('the same content written over itself keeps its blob and its reference counts', async () => {
      const bucket = await newBucket();
      const blobOf = async () =>
        (
          await layer.sql.query<{ id: number; ref_count: number }>(
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
      expect(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('same bytes');
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
      const copy = await layer.dpFetch(
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
      const replaced = await layer.dpFetch(
        'POST',
        `/internal/objects/${bucket}/src/copy`,
        JSON.stringify({ sourceBucket: bucket, sourceKey: 'src', metadataDirective: 'REPLACE', contentType: 'text/markdown', userMetadata: { b: '2' } }),
        { 'content-type': 'application/json' },
      );
      expect(await replaced.json()).to.deep.include({ contentType: 'text/markdown', userMetadata: { b: '2' } });
      const self = await layer.dpFetch('POST', `/internal/objects/${bucket}/src/copy`, JSON.stringify({ sourceBucket: bucket, sourceKey: 'src' }), {
        'content-type': 'application/json',
      });
      expect(await errorOf(self)).to.deep.equal({ status: 400, code: 'InvalidRequest' });
      const failed = await layer.dpFetch(
        'POST',
        `/internal/objects/${bucket}/x/copy`,
        JSON.stringify({ sourceBucket: bucket, sourceKey: 'src', conditions: { ifMatch: '"nope"' } }),
        {
          'content-type': 'application/json',
        },
      );
      expect(await errorOf(failed)).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
      // The blob is referenced by both objects: recycling and purging the source keeps the bytes.
      await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/src`);
      await layer.cpFetch('POST', '/internal/purge', { now: '2099-01-01T00:00:00Z' });
      expect(await (await layer.dpFetch('GET', `/internal/objects/${target}/dst`)).text()).to.equal('copy me');
    });

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

    it('concurrent writers of one key leave one object and consistent blob references', async () => {
      const bucket = await newBucket();
      const bodies = ['content A', 'content B', 'content C'];
      const results = await Promise.all(Array.from({ length: 24 }, (_, i) => put(bucket, 'contended', bodies[i % 3])));
      expect(results.map((r) => r.status)).to.deep.equal(Array(24).fill(200));
      const live = await layer.sql.query<{ etag: string }>(
        "SELECT o.etag FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 AND o.state = 'NORMAL'",
        [bucket],
      );
      expect(live.rows).to.have.length(1);
      const served = await (await layer.dpFetch('GET', `/internal/objects/${bucket}/contended`)).text();
      expect(md5(served)).to.equal(live.rows[0].etag);
      // The same content uploaded at once by many writers ends up as one blob.
      const same = await Promise.all(Array.from({ length: 6 }, (_, i) => put(bucket, `same-${i}`, 'identical bytes')));
      expect(same.map((r) => r.status)).to.deep.equal(Array(6).fill(200));
      const distinct = await layer.sql.query<{ n: number }>(
        "SELECT count(DISTINCT o.blob_id)::int AS n FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 AND o.key LIKE 'same-%'",
        [bucket],
      );
      expect(Number(distinct.rows[0].n)).to.equal(1);
      await assertBlobInvariants();
    });

    it('writes object.created to the outbox in the commit and relays it to the broker', async () => {
      const bucket = await newBucket();
      await put(bucket, 'evented', 'payload');
      const rows = await layer.sql.query<{ type: string; payload: { key: string; bucket: string } }>(
        "SELECT type, payload FROM outbox WHERE payload->>'bucket' = $1",
        [bucket],
      );
      expect(rows.rows.map((r) => [r.type, r.payload.key])).to.deep.include(['object.created', 'evented']);
      await eventually(async () => {
        const unsent = await layer.sql.query("SELECT 1 FROM outbox WHERE sent_at IS NULL AND payload->>'bucket' = $1", [bucket]);
        expect(unsent.rows).to.have.length(0);
      });
    });

    it('exposes its metrics: requests, bytes in and out, instant uploads, multipart in flight, outbox backlog', async () => {
      const metrics = await (await fetch(`${layer.dp.url}/metrics`)).text();
      for (const name of [
        'http_requests_total',
        'http_request_duration_seconds_bucket',
        'strata_data_bytes_in_total',
        'strata_data_bytes_out_total',
        'strata_multipart_uploads_in_flight',
        'strata_outbox_backlog',
      ]) {
        expect(metrics, name).to.include(name);
      }
      const bytesIn = /strata_data_bytes_in_total\{service="data-plane"\} (\d+)/.exec(metrics);
      expect(Number(bytesIn?.[1])).to.be.greaterThan(100_000);
      const cp = await (await fetch(`${layer.cp.url}/metrics`)).text();
      expect(cp).to.match(/strata_events_consumed_total\{type="object.created",outcome="applied",service="control-plane"\} \d+/);
    });
  });
}
