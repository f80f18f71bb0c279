import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import type { ObjectLayer, ObjectRead } from '../../images/object-model/src/index.js';
import { s3Rejection } from '../support/s3-rejection.js';

/** The operations the contract covers (every one the tests' FakeObjectLayer has). */
export type ContractLayer = Pick<
  ObjectLayer,
  | 'createBucket'
  | 'getBucket'
  | 'listBuckets'
  | 'putObject'
  | 'getObject'
  | 'headObject'
  | 'listObjects'
  | 'deleteObject'
  | 'deleteObjects'
  | 'copyObject'
  | 'createMultipart'
  | 'uploadPart'
  | 'completeMultipart'
  | 'abortMultipart'
>;

export interface ContractSubject {
  layer: ContractLayer;
  close(): Promise<void>;
}

const OWNER = 'alice';
const OTHER = 'bob';
/** S3's smallest part but the last. */
const MIN_PART = 5 * 1024 * 1024;

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

async function bytesOf(body: Readable | undefined): Promise<Buffer> {
  expect(body, 'a body').to.not.equal(undefined);
  const chunks: Buffer[] = [];
  for await (const c of body!) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** The S3 error code a call fails with (the call must fail). */
async function codeOf(p: Promise<unknown>): Promise<string> {
  return (await s3Rejection(p)).code;
}

/**
 * One behavioural suite of the ObjectLayer contract, run over every implementation (as MinIO runs one
 * suite over every backend): the tests' FakeObjectLayer and the real layer (the gateway's HTTP clients
 * over the data and control planes) must answer each call alike, errors included. `start` makes a
 * subject whose buckets `alice` and `bob` may create.
 */
export function objectLayerContract(name: string, start: () => Promise<ContractSubject>, opts: { hookTimeoutMs?: number } = {}): void {
  describe(`ObjectLayer contract: ${name}`, function () {
    let subject: ContractSubject;
    let seq = 0;
    const layer = () => subject.layer;
    /** A fresh bucket of alice's (names are never reused: a deleted name is held for its owner). */
    const bucket = async () => {
      const b = `contract-${Date.now().toString(36)}-${++seq}`;
      await layer().createBucket(b, OWNER);
      return b;
    };
    const put = (b: string, key: string, body: string | Buffer, extra: Partial<Parameters<ObjectLayer['putObject']>[2]> = {}) => {
      const bytes = Buffer.from(body);
      return layer().putObject(b, key, { owner: OWNER, userMetadata: {}, contentLength: bytes.length, ...extra }, Readable.from([bytes]));
    };
    const read = async (r: ObjectRead) => (r.body ? (await bytesOf(r.body)).toString() : undefined);

    before(async function () {
      this.timeout(opts.hookTimeoutMs ?? 10_000);
      subject = await start();
    });
    after(async function () {
      this.timeout(opts.hookTimeoutMs ?? 10_000);
      await subject?.close();
    });

    describe('buckets', () => {
      it('createBucket answers the bucket; its owner again is BucketAlreadyOwnedByYou, anyone else BucketAlreadyExists', async () => {
        const b = `contract-${Date.now().toString(36)}-${++seq}`;
        const info = await layer().createBucket(b, OWNER);
        expect(info).to.deep.include({ name: b, owner: OWNER });
        expect(info.backend.kind).to.equal('fs');
        expect(Number.isNaN(Date.parse(info.createdAt))).to.equal(false);
        expect(await codeOf(layer().createBucket(b, OWNER))).to.equal('BucketAlreadyOwnedByYou');
        expect(await codeOf(layer().createBucket(b, OTHER))).to.equal('BucketAlreadyExists');
        expect(await layer().getBucket(b)).to.deep.include({ name: b, owner: OWNER });
      });

      it('getBucket of an unknown bucket is NoSuchBucket; listBuckets names only the owner’s', async () => {
        expect(await codeOf(layer().getBucket('contract-no-such-bucket'))).to.equal('NoSuchBucket');
        const mine = await bucket();
        const names = (await layer().listBuckets(OWNER)).map((x) => x.name);
        expect(names).to.include(mine);
        expect((await layer().listBuckets(OTHER)).map((x) => x.name)).to.not.include(mine);
        expect([...names].sort()).to.deep.equal(names);
      });

      it('listBuckets pages by name: prefix, after (keyset), limit and names select in byte order', async () => {
        const stem = `contract-page-${Date.now().toString(36)}-${++seq}`;
        const made = [`${stem}-b`, `${stem}-a`, `${stem}-c`, `${stem}.a`];
        for (const b of made) await layer().createBucket(b, OWNER);
        const names = async (q: Parameters<ContractLayer['listBuckets']>[1]) => (await layer().listBuckets(OWNER, q)).map((x) => x.name);
        expect(await names({ prefix: stem })).to.deep.equal([`${stem}-a`, `${stem}-b`, `${stem}-c`, `${stem}.a`]);
        expect(await names({ prefix: stem, limit: 2 })).to.deep.equal([`${stem}-a`, `${stem}-b`]);
        expect(await names({ prefix: stem, after: `${stem}-b`, limit: 2 })).to.deep.equal([`${stem}-c`, `${stem}.a`]);
        expect(await names({ prefix: stem, after: `${stem}.a` })).to.deep.equal([]);
        expect(await names({ prefix: `${stem}-`, names: [`${stem}-c`, `${stem}-a`, `${stem}.a`] })).to.deep.equal([`${stem}-a`, `${stem}-c`]);
        expect(await layer().listBuckets(OTHER, { prefix: stem })).to.deep.equal([]);
      });
    });

    describe('objects', () => {
      it('putObject answers the stored object; headObject and getObject answer it again', async () => {
        const b = await bucket();
        const { object, instant } = await put(b, 'dir/a b.txt', 'hello world', { contentType: 'text/plain', userMetadata: { colour: 'blue' } });
        expect(instant).to.equal(false);
        expect(object).to.deep.include({ bucket: b, key: 'dir/a b.txt', size: 11, etag: md5('hello world'), contentType: 'text/plain' });
        expect(object.userMetadata).to.deep.equal({ colour: 'blue' });
        const head = await layer().headObject(b, 'dir/a b.txt');
        expect(head).to.deep.include({ size: 11, etag: md5('hello world'), contentType: 'text/plain', lastModified: object.lastModified });
        expect(head.userMetadata).to.deep.equal({ colour: 'blue' });
        const got = await layer().getObject(b, 'dir/a b.txt', { method: 'GET' });
        expect(got).to.deep.include({ status: 200, contentLength: 11 });
        expect(got.object).to.deep.include({ size: 11, etag: md5('hello world') });
        expect(await read(got)).to.equal('hello world');
        const headRead = await layer().getObject(b, 'dir/a b.txt', { method: 'HEAD' });
        expect(headRead).to.deep.include({ status: 200, contentLength: 11 });
        expect(headRead.body).to.equal(undefined);
      });

      it('a missing object is NoSuchKey to headObject and getObject', async () => {
        const b = await bucket();
        expect(await codeOf(layer().headObject(b, 'nothing'))).to.equal('NoSuchKey');
        expect(await codeOf(layer().getObject(b, 'nothing', { method: 'GET' }))).to.equal('NoSuchKey');
      });

      it('reads a range: first-last and a suffix answer 206 with Content-Range; a start past the end is InvalidRange', async () => {
        const b = await bucket();
        await put(b, 'r', '0123456789');
        const mid = await layer().getObject(b, 'r', { method: 'GET', range: 'bytes=2-4' });
        expect(mid).to.deep.include({ status: 206, contentLength: 3, contentRange: 'bytes 2-4/10' });
        expect(await read(mid)).to.equal('234');
        const tail = await layer().getObject(b, 'r', { method: 'GET', range: 'bytes=-3' });
        expect(tail).to.deep.include({ status: 206, contentRange: 'bytes 7-9/10' });
        expect(await read(tail)).to.equal('789');
        expect(await codeOf(layer().getObject(b, 'r', { method: 'GET', range: 'bytes=10-12' }))).to.equal('InvalidRange');
      });

      it('decides read conditions before the body: If-None-Match of its ETag is 304 without one, If-Match of another is PreconditionFailed', async () => {
        const b = await bucket();
        const { object } = await put(b, 'c', 'conditional');
        const notModified = await layer().getObject(b, 'c', { method: 'GET', conditions: { ifNoneMatch: `"${object.etag}"` } });
        expect(notModified.status).to.equal(304);
        expect(notModified.body).to.equal(undefined);
        expect(await codeOf(layer().getObject(b, 'c', { method: 'GET', conditions: { ifMatch: '"0123"' } }))).to.equal('PreconditionFailed');
        expect((await layer().getObject(b, 'c', { method: 'GET', conditions: { ifMatch: object.etag } })).status).to.equal(200);
      });

      it('keeps write conditions: If-None-Match * on an existing key and If-Match of another ETag fail; If-Match of a missing key is NoSuchKey', async () => {
        const b = await bucket();
        const { object } = await put(b, 'w', 'first');
        expect(await codeOf(put(b, 'w', 'second', { ifNoneMatch: '*' }))).to.equal('PreconditionFailed');
        expect(await codeOf(put(b, 'w', 'second', { ifMatch: md5('other') }))).to.equal('PreconditionFailed');
        expect(await codeOf(put(b, 'absent', 'x', { ifMatch: md5('x') }))).to.equal('NoSuchKey');
        expect((await put(b, 'w', 'second', { ifMatch: object.etag })).object.etag).to.equal(md5('second'));
        expect((await put(b, 'new', 'x', { ifNoneMatch: '*' })).object.etag).to.equal(md5('x'));
      });

      it('refuses a body whose Content-MD5 does not match (BadDigest) and keeps the object it would replace', async () => {
        const b = await bucket();
        await put(b, 'd', 'kept');
        const wrong = createHash('md5').update('other').digest('base64');
        expect(await codeOf(put(b, 'd', 'replaced', { contentMd5: wrong }))).to.equal('BadDigest');
        expect(await read(await layer().getObject(b, 'd', { method: 'GET' }))).to.equal('kept');
        const right = createHash('md5').update('replaced').digest('base64');
        expect((await put(b, 'd', 'replaced', { contentMd5: right })).object.etag).to.equal(md5('replaced'));
      });
    });

    describe('listings', () => {
      it('lists keys in byte order, under a prefix, grouped by a delimiter', async () => {
        const b = await bucket();
        for (const key of ['a/1', 'a/2', 'B', 'a/sub/3', 'b', 'c']) await put(b, key, key);
        const all = await layer().listObjects(b, {});
        expect(all.objects.map((o) => o.key)).to.deep.equal(['B', 'a/1', 'a/2', 'a/sub/3', 'b', 'c']);
        expect(all.isTruncated).to.equal(false);
        expect(all.objects[0]).to.deep.include({ bucket: b, size: 1, etag: md5('B') });
        const underA = await layer().listObjects(b, { prefix: 'a/', delimiter: '/' });
        expect(underA.objects.map((o) => o.key)).to.deep.equal(['a/1', 'a/2']);
        expect(underA.commonPrefixes).to.deep.equal(['a/sub/']);
        const top = await layer().listObjects(b, { delimiter: '/' });
        expect(top.objects.map((o) => o.key)).to.deep.equal(['B', 'b', 'c']);
        expect(top.commonPrefixes).to.deep.equal(['a/']);
        expect((await layer().listObjects(b, { startAfter: 'a/2' })).objects.map((o) => o.key)).to.deep.equal(['a/sub/3', 'b', 'c']);
      });

      it('pages by max-keys with a continuation token, every key exactly once', async () => {
        const b = await bucket();
        const keys = ['k0', 'k1', 'k2', 'k3', 'k4'];
        for (const key of keys) await put(b, key, key);
        const seen: string[] = [];
        let token: string | undefined;
        for (let page = 0; page < 10; page++) {
          const r = await layer().listObjects(b, { maxKeys: 2, ...(token ? { continuationToken: token } : {}) });
          expect(r.objects.length).to.be.at.most(2);
          seen.push(...r.objects.map((o) => o.key));
          if (!r.isTruncated) break;
          expect(r.nextContinuationToken).to.be.a('string');
          token = r.nextContinuationToken;
        }
        expect(seen).to.deep.equal(keys);
      });

      it('pages over common prefixes too: each is one entry, listed once', async () => {
        const b = await bucket();
        for (const key of ['a/1', 'a/2', 'b', 'c/1', 'c/2']) await put(b, key, key);
        const seen: string[] = [];
        let token: string | undefined;
        for (let page = 0; page < 10; page++) {
          const r = await layer().listObjects(b, { delimiter: '/', maxKeys: 1, ...(token ? { continuationToken: token } : {}) });
          seen.push(...r.commonPrefixes, ...r.objects.map((o) => o.key));
          if (!r.isTruncated) break;
          token = r.nextContinuationToken;
        }
        expect(seen).to.deep.equal(['a/', 'b', 'c/']);
      });
    });

    describe('deletes', () => {
      it('deleteObject removes the object; a missing key deletes without error; a failed condition keeps it', async () => {
        const b = await bucket();
        const { object } = await put(b, 'x', 'x');
        await layer().deleteObject(b, 'nothing');
        expect(await codeOf(layer().deleteObject(b, 'x', { ifMatch: md5('other') }))).to.equal('PreconditionFailed');
        expect(await codeOf(layer().deleteObject(b, 'nothing', { ifMatch: '*' }))).to.equal('NoSuchKey');
        await layer().headObject(b, 'x');
        await layer().deleteObject(b, 'x', { ifMatch: object.etag, size: 1 });
        expect(await codeOf(layer().headObject(b, 'x'))).to.equal('NoSuchKey');
      });

      it('deleteObjects answers each key: deleted, or its own error', async () => {
        const b = await bucket();
        await put(b, 'one', '1');
        await put(b, 'two', '2');
        const r = await layer().deleteObjects(b, [{ key: 'one' }, { key: 'two', ifMatch: md5('other') }, { key: 'gone' }]);
        expect([...r.deleted].sort()).to.deep.equal(['gone', 'one']);
        expect(r.errors.map((e) => [e.key, e.code])).to.deep.equal([['two', 'PreconditionFailed']]);
        expect((await layer().listObjects(b, {})).objects.map((o) => o.key)).to.deep.equal(['two']);
      });
    });

    describe('copies', () => {
      it('copies with the source’s metadata (COPY) or new metadata (REPLACE); an unchanged copy onto itself is InvalidRequest', async () => {
        const b = await bucket();
        await put(b, 'src', 'copied bytes', { contentType: 'text/plain', userMetadata: { from: 'source' } });
        const base = { owner: OWNER, sourceBucket: b, sourceKey: 'src', taggingDirective: 'COPY' as const };
        const kept = await layer().copyObject(b, 'kept', { ...base, metadataDirective: 'COPY' });
        expect(kept).to.deep.include({ key: 'kept', size: 12, etag: md5('copied bytes'), contentType: 'text/plain' });
        expect(kept.userMetadata).to.deep.equal({ from: 'source' });
        const replaced = await layer().copyObject(b, 'replaced', {
          ...base,
          metadataDirective: 'REPLACE',
          contentType: 'application/json',
          userMetadata: { from: 'copy' },
        });
        expect(replaced).to.deep.include({ contentType: 'application/json' });
        expect(replaced.userMetadata).to.deep.equal({ from: 'copy' });
        expect(await read(await layer().getObject(b, 'replaced', { method: 'GET' }))).to.equal('copied bytes');
        expect(await codeOf(layer().copyObject(b, 'src', { ...base, metadataDirective: 'COPY' }))).to.equal('InvalidRequest');
        expect(await codeOf(layer().copyObject(b, 'x', { ...base, sourceKey: 'nothing', metadataDirective: 'COPY' }))).to.equal('NoSuchKey');
        expect(await codeOf(layer().copyObject(b, 'x', { ...base, metadataDirective: 'COPY', conditions: { ifMatch: md5('other') } }))).to.equal(
          'PreconditionFailed',
        );
      });
    });

    describe('multipart uploads', () => {
      const part = (b: string, key: string, uploadId: string, n: number, bytes: Buffer) =>
        layer().uploadPart(b, key, uploadId, n, { contentLength: bytes.length }, Readable.from([bytes]));

      it('completes parts into one object with S3’s multipart ETag (the MD5 of the parts’ MD5s, -N)', async function () {
        this.timeout(60_000);
        const b = await bucket();
        const { uploadId } = await layer().createMultipart(b, 'big', { owner: OWNER, contentType: 'application/x-big' });
        const first = Buffer.alloc(MIN_PART, 'a');
        const second = Buffer.from('the end');
        const p1 = await part(b, 'big', uploadId, 1, first);
        const p2 = await part(b, 'big', uploadId, 2, second);
        expect([p1.etag, p2.etag]).to.deep.equal([md5(first), md5(second)]);
        const meta = await layer().completeMultipart(b, 'big', uploadId, [
          { partNumber: 1, etag: p1.etag },
          { partNumber: 2, etag: `"${p2.etag}"` },
        ]);
        const expected = `${md5(Buffer.concat([Buffer.from(p1.etag, 'hex'), Buffer.from(p2.etag, 'hex')]))}-2`;
        expect(meta).to.deep.include({ key: 'big', size: MIN_PART + second.length, etag: expected, contentType: 'application/x-big' });
        const tail = await layer().getObject(b, 'big', { method: 'GET', range: `bytes=${MIN_PART - 1}-` });
        expect(await read(tail)).to.equal('athe end');
        expect(await codeOf(part(b, 'big', uploadId, 3, second))).to.equal('NoSuchUpload');
      });

      it('refuses parts out of order (InvalidPartOrder), an unknown ETag (InvalidPart), a small part but the last (EntityTooSmall)', async () => {
        const b = await bucket();
        const { uploadId } = await layer().createMultipart(b, 'k', { owner: OWNER });
        const p1 = await part(b, 'k', uploadId, 1, Buffer.from('one'));
        const p2 = await part(b, 'k', uploadId, 2, Buffer.from('two'));
        const complete = (parts: Array<{ partNumber: number; etag: string }>) => layer().completeMultipart(b, 'k', uploadId, parts);
        expect(
          await codeOf(
            complete([
              { partNumber: 2, etag: p2.etag },
              { partNumber: 1, etag: p1.etag },
            ]),
          ),
        ).to.equal('InvalidPartOrder');
        expect(await codeOf(complete([{ partNumber: 1, etag: md5('other') }]))).to.equal('InvalidPart');
        expect(
          await codeOf(
            complete([
              { partNumber: 1, etag: p1.etag },
              { partNumber: 2, etag: p2.etag },
            ]),
          ),
        ).to.equal('EntityTooSmall');
        // Still in progress after each refusal: one part, the last, may be small.
        expect((await complete([{ partNumber: 2, etag: p2.etag }])).etag).to.equal(`${md5(Buffer.from(p2.etag, 'hex'))}-1`);
      });

      it('abortMultipart ends the upload: its parts and its completion are NoSuchUpload after', async () => {
        const b = await bucket();
        const { uploadId } = await layer().createMultipart(b, 'k', { owner: OWNER });
        const p1 = await part(b, 'k', uploadId, 1, Buffer.from('one'));
        await layer().abortMultipart(b, 'k', uploadId);
        expect(await codeOf(layer().completeMultipart(b, 'k', uploadId, [{ partNumber: 1, etag: p1.etag }]))).to.equal('NoSuchUpload');
        expect(await codeOf(layer().abortMultipart(b, 'k', uploadId))).to.equal('NoSuchUpload');
        expect(await codeOf(layer().headObject(b, 'k'))).to.equal('NoSuchKey');
      });
    });
  });
}
