import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { expect } from 'chai';
import { DEFAULT_BUCKET_NAME_HOLD_MS } from '../../images/control-plane/src/app.js';
import { enc, eventually, rawPut } from './harness.js';
import { objectsSuite } from './objects-fixture.js';
import { httpExchange } from '../support/http.js';

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');
const md5b64 = (b: Buffer | string) => createHash('md5').update(b).digest('base64');

for (const inlineBlobBytes of [undefined, 0]) {
  describe(`data plane objects (PostgreSQL, ${inlineBlobBytes === 0 ? 'every body in a file' : 'small bodies inline'})`, function () {
    this.timeout(60_000);
    const fx = objectsSuite(inlineBlobBytes);
    const { newBucket, put, errorOf, blobFiles, tempFiles, rowCount } = fx;

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

      const get = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`);
      expect(get.status).to.equal(200);
      expect(get.headers.get('etag')).to.equal(`"${md5(body)}"`);
      expect(get.headers.get('content-type')).to.equal('application/x-test');
      expect(JSON.parse(get.headers.get('x-strata-meta')!)).to.deep.equal({ color: 'blue', note: 'café' });
      expect(Buffer.from(await get.arrayBuffer()).equals(body)).to.equal(true);

      const head = await fx.layer.dpFetch('HEAD', `/internal/objects/${bucket}/${enc('dir/file.bin')}`);
      expect(head.status).to.equal(200);
      expect(head.headers.get('content-length')).to.equal(String(body.length));

      const range = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { range: 'bytes=10-19' });
      expect(range.status).to.equal(206);
      expect(range.headers.get('content-range')).to.equal(`bytes 10-19/${body.length}`);
      expect(Buffer.from(await range.arrayBuffer()).equals(body.subarray(10, 20))).to.equal(true);
      const suffix = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { range: 'bytes=-5' });
      expect(Buffer.from(await suffix.arrayBuffer()).equals(body.subarray(body.length - 5))).to.equal(true);
      const bad = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { range: `bytes=${body.length}-` });
      expect(await errorOf(bad)).to.deep.equal({ status: 416, code: 'InvalidRange' });
      const notModified = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('dir/file.bin')}`, undefined, { 'if-none-match': `"${md5(body)}"` });
      expect(notModified.status).to.equal(304);
      expect(await errorOf(await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/nope`))).to.deep.equal({ status: 404, code: 'NoSuchKey' });
      expect(await errorOf(await fx.layer.dpFetch('GET', `/internal/objects/no-such-bucket-x/k`))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
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
        const url = new URL(`${fx.layer.dp.url}/internal/objects/${bucket}/aborted`);
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
      const status = await rawPut(`${fx.layer.dp.url}/internal/objects/${bucket}/short`, { 'content-length': '100', 'transfer-encoding': '' }, (req) => {
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
        `${fx.layer.dp.url}/internal/objects/${bucket}/${key}`,
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
        const r = await fx.layer.dpFetch(method, `/internal/objects/${bucket}/ahead.bin`);
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
      const got = await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/trailed.bin`);
      expect(JSON.parse(got.headers.get('x-strata-headers')!)).to.deep.equal({ 'content-language': 'fr', ...checksum });
      expect(Buffer.from(await got.arrayBuffer()).equals(body)).to.equal(true);
      // Without any: no header at all.
      expect((await put(bucket, 'none.bin', 'x')).status).to.equal(200);
      expect((await fx.layer.dpFetch('HEAD', `/internal/objects/${bucket}/none.bin`)).headers.get('x-strata-headers')).to.equal(null);
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
            port: fx.layer.dp.port,
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
        fx.layer.dp.url,
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
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      const before = await blobFiles();
      expect(await errorOf(await put(bucket, 'k', 'one'))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      expect(await blobFiles()).to.deep.equal(before);
      expect(await tempFiles()).to.deep.equal([]);
      expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
      expect((await put(bucket, 'k', 'two')).status).to.equal(200);
      expect(await rowCount(bucket)).to.equal(1);
      expect(await (await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('two');
    });

    /** The bucket's record as the gateway resolves it (the control plane's), as x-strata-bucket. */
    const resolved = async (bucket: string) => {
      const { id, name, owner, backend, encryption } = (await (await fx.layer.cpFetch('GET', `/internal/buckets/${bucket}`)).json()) as Record<string, unknown>;
      return { id, name, owner, backend, ...(encryption ? { encryption } : {}) };
    };
    const withRecord = (record: object) => ({ 'x-strata-bucket': JSON.stringify(record) });

    it("a bucket deleted and created again by its owner while the gateway still holds the old record: the owner's next write lands in the new bucket, a writer only the old bucket admitted gets NoSuchBucket", async () => {
      const bucket = await newBucket();
      const old = await resolved(bucket); // the gateway keeps it for a moment
      expect((await put(bucket, 'k', 'one', withRecord(old))).status).to.equal(200);
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/k`)).status).to.equal(204);
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
      expect(await errorOf(await put(bucket, 'k', 'grant', { ...withRecord(old), 'x-strata-owner': 'bob' }))).to.deep.equal({
        status: 404,
        code: 'NoSuchBucket',
      });
      const res = await put(bucket, 'k', 'two', withRecord(old));
      expect(res.status, await res.text()).to.equal(200);
      expect(await rowCount(bucket)).to.equal(1);
      expect(await (await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).text()).to.equal('two');
      expect(await tempFiles()).to.deep.equal([]);
    });

    it('an anonymous write (x-strata-anonymous) resolved against a bucket its owner since deleted and created again answers NoSuchBucket and keeps nothing', async () => {
      const bucket = await newBucket();
      const old = await resolved(bucket); // the record that admitted the write (its ACL granted AllUsers WRITE)
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
      const before = await blobFiles();
      const anonymous = { ...withRecord(old), 'x-strata-owner': 'alice', 'x-strata-anonymous': 'true' };
      const res = await put(bucket, 'k', randomBytes(100_000), anonymous);
      expect(res.status).to.equal(404);
      expect(await errorOf(res)).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      expect(await rowCount(bucket)).to.equal(0);
      expect(await blobFiles()).to.deep.equal(before);
      expect(await tempFiles()).to.deep.equal([]);
      expect(await errorOf(await put(bucket, 'k', 'x', { 'x-strata-anonymous': 'yes' }))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
    });

    it('an anonymous copy (anonymous in its body) resolved against a bucket its owner since deleted and created again answers NoSuchBucket; the owner’s lands in the new one', async () => {
      const source = await newBucket();
      expect((await put(source, 'src', 'shared bytes')).status).to.equal(200);
      const target = await newBucket();
      const old = await resolved(target); // the record whose ACL admitted the copy
      const sourceRecord = JSON.stringify(await resolved(source));
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${target}`)).status).to.equal(204);
      expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${target}`, { owner: 'alice' })).status).to.equal(200);
      const copy = (anonymous: boolean) =>
        fx.layer.dpFetch(
          'POST',
          `/internal/objects/${target}/copied/copy`,
          JSON.stringify({ owner: 'alice', sourceBucket: source, sourceKey: 'src', ...(anonymous ? { anonymous: true } : {}) }),
          { 'content-type': 'application/json', ...withRecord(old), 'x-strata-source-bucket': sourceRecord },
        );
      expect(await errorOf(await copy(true))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      expect(await rowCount(target)).to.equal(0);
      expect((await copy(false)).status).to.equal(200);
      expect(await (await fx.layer.dpFetch('GET', `/internal/objects/${target}/copied`)).text()).to.equal('shared bytes');
    });

    it("one resolution per request: a write goes to the bucket record the gateway resolved (x-strata-bucket), which must name the path's bucket", async () => {
      const bucket = await newBucket();
      const record = await resolved(bucket);
      expect(record.id).to.be.a('number');
      // The record's owner is the one that owns the version when the writer is not named (as the data plane's own lookup would give).
      const noWriter = (await put(bucket, 'k', 'one', { ...withRecord({ ...record, owner: 'carol' }), 'x-strata-owner': '' })).status;
      expect(noWriter).to.equal(200);
      const owners = await fx.layer.sql.query<{ owner: string }>(
        "SELECT o.owner FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 AND o.key = 'k' AND o.state = 'NORMAL'",
        [bucket],
      );
      expect(owners.rows.map((r) => r.owner)).to.deep.equal(['carol']);
      const other = await newBucket();
      expect(await errorOf(await put(other, 'k', 'x', withRecord(record)))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      expect(await errorOf(await put(bucket, 'k', 'x', { 'x-strata-bucket': '{"id":"1"}' }))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      expect(await rowCount(other)).to.equal(0);
    });
    it("a read resolved against a bucket since deleted and created again by another account answers NoSuchBucket, never the new bucket's object (GET, HEAD)", async () => {
      const bucket = await newBucket();
      const old = await resolved(bucket); // the gateway keeps it for its lifetime
      expect((await put(bucket, 'k', 'old', withRecord(old))).status).to.equal(200);
      const get = (record: object, method = 'GET') => fx.layer.dpFetch(method, `/internal/objects/${bucket}/k`, undefined, withRecord(record));
      for (let i = 0; i < 2; i++) expect(await (await get(old)).text()).to.equal('old'); // the second one from the read cache
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/k`)).status).to.equal(204);
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      fx.layer.clock.now = new Date(fx.layer.clock.now.getTime() + DEFAULT_BUCKET_NAME_HOLD_MS + 1000); // past the name hold
      expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'bob' })).status).to.equal(200);
      const current = await resolved(bucket);
      expect((await put(bucket, 'k', 'new', { ...withRecord(current), 'x-strata-owner': 'bob' })).status).to.equal(200);
      for (let i = 0; i < 2; i++) expect(await (await get(current)).text()).to.equal('new');
      expect(await errorOf(await get(old))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      expect((await get(old, 'HEAD')).status).to.equal(404);
    });

    it("multipart create and parts go to the bucket record the gateway resolved: a part sent with a record of the name's former bucket never lands in the new bucket's upload", async () => {
      const bucket = await newBucket();
      const old = await resolved(bucket);
      const json = { 'content-type': 'application/json' };
      const initiate = (record: object, path = bucket) =>
        fx.layer.dpFetch('POST', `/internal/multipart/${path}/big`, JSON.stringify({ owner: 'bob' }), { ...json, ...withRecord(record) });
      const part = (uploadId: string, record: object) =>
        fx.layer.dpFetch('PUT', `/internal/multipart/${bucket}/big/${uploadId}/parts/1`, 'part one', withRecord(record));
      expect(await errorOf(await initiate(old, await newBucket()))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      fx.layer.clock.now = new Date(fx.layer.clock.now.getTime() + DEFAULT_BUCKET_NAME_HOLD_MS + 1000); // past the name hold
      expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'bob' })).status).to.equal(200);
      const current = await resolved(bucket);
      const created = await initiate(current);
      expect(created.status).to.equal(200);
      const { uploadId } = (await created.json()) as { uploadId: string };
      expect(await errorOf(await part(uploadId, old))).to.deep.equal({ status: 404, code: 'NoSuchUpload' });
      expect((await part(uploadId, current)).status).to.equal(200);
    });

    it("a copy (CopyObject, UploadPartCopy) reads the source bucket and writes the destination bucket the gateway resolved: a record of the source name's former bucket answers NoSuchBucket, never the new bucket's object", async () => {
      const source = await newBucket();
      const oldSource = await resolved(source);
      expect((await put(source, 'k', 'old', withRecord(oldSource))).status).to.equal(200);
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${source}/objects/k`)).status).to.equal(204);
      expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${source}`)).status).to.equal(204);
      fx.layer.clock.now = new Date(fx.layer.clock.now.getTime() + DEFAULT_BUCKET_NAME_HOLD_MS + 1000); // past the name hold
      expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${source}`, { owner: 'bob' })).status).to.equal(200);
      const current = await resolved(source);
      expect((await put(source, 'k', 'bob only', { ...withRecord(current), 'x-strata-owner': 'bob' })).status).to.equal(200);
      const target = await newBucket();
      const copy = (records: Record<string, string>) =>
        fx.layer.dpFetch('POST', `/internal/objects/${target}/copy-of-k/copy`, JSON.stringify({ owner: 'alice', sourceBucket: source, sourceKey: 'k' }), {
          'content-type': 'application/json',
          ...records,
        });
      const targetRecord = withRecord(await resolved(target));
      expect(await errorOf(await copy({ ...targetRecord, 'x-strata-source-bucket': JSON.stringify(oldSource) }))).to.deep.equal({
        status: 404,
        code: 'NoSuchBucket',
      });
      expect(await errorOf(await copy({ ...withRecord(current), 'x-strata-source-bucket': JSON.stringify(current) }))).to.deep.equal({
        status: 400,
        code: 'InvalidArgument',
      });
      expect(await rowCount(target)).to.equal(0);
      expect((await copy({ ...targetRecord, 'x-strata-source-bucket': JSON.stringify(current) })).status).to.equal(200);
      // UploadPartCopy alike.
      const json = { 'content-type': 'application/json' };
      const created = await fx.layer.dpFetch('POST', `/internal/multipart/${target}/parts`, JSON.stringify({ owner: 'alice' }), { ...json, ...targetRecord });
      const { uploadId } = (await created.json()) as { uploadId: string };
      const partCopy = (sourceRecord: object) =>
        fx.layer.dpFetch('PUT', `/internal/multipart/${target}/parts/${uploadId}/parts/1/copy`, JSON.stringify({ sourceBucket: source, sourceKey: 'k' }), {
          ...json,
          ...targetRecord,
          'x-strata-source-bucket': JSON.stringify(sourceRecord),
        });
      expect(await errorOf(await partCopy(oldSource))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      expect((await partCopy(current)).status).to.equal(200);
    });

    it('exposes its metrics: requests, bytes in and out, instant uploads, multipart in flight, outbox backlog', async () => {
      const metrics = await (await fetch(`${fx.layer.dp.url}/metrics`)).text();
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
      const cp = await (await fetch(`${fx.layer.cp.url}/metrics`)).text();
      expect(cp).to.match(/strata_events_consumed_total\{type="object.created",outcome="applied",service="control-plane"\} \d+/);
    });
  });
}
