import { CopyObjectCommand, GetObjectAttributesCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { bodyBytes, describeWithBucket, login, rootPresign, s3ErrorOf, s3Failure, uploadInParts } from './support/s3.js';

const MiB = 1024 * 1024;

/**
 * GetObject/HeadObject `partNumber` (what the AWS SDKs' transfer managers use for parallel downloads:
 * part 1 tells the parts' count, the others follow by number).
 */
describeWithBucket(
  'e2e: GetObject and HeadObject by part number',
  'partnum',
  (env, bucket) => {
    // Three parts of different sizes, so that a part's place cannot be guessed from one part size.
    const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB + 3), randomBytes(1000)];
    const whole = Buffer.concat(parts);
    const offsets = parts.map((_, i) => parts.slice(0, i).reduce((n, p) => n + p.length, 0));
    const signed = (key: string, query: Array<[string, string]>) => rootPresign(env.p.endpoint, 'GET', `/${bucket}/${key}`, { extraQuery: query });

    before(async () => {
      await uploadInParts(env.s3, bucket, 'multi.bin', parts);
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'single.bin', Body: parts[2] }));
    });

    it('a multipart object answers each part (206, its Content-Range) with the parts count; HEAD too', async () => {
      for (const [i, body] of parts.entries()) {
        const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'multi.bin', PartNumber: i + 1 }));
        expect([got.$metadata.httpStatusCode, got.PartsCount, got.ContentLength, got.ContentRange]).to.deep.equal([
          206,
          3,
          body.length,
          `bytes ${offsets[i]}-${offsets[i]! + body.length - 1}/${whole.length}`,
        ]);
        expect((await bodyBytes(got)).equals(body), `part ${i + 1}`).to.equal(true);
      }
      const head = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'multi.bin', PartNumber: 2 }));
      expect([head.PartsCount, head.ContentLength]).to.deep.equal([3, parts[1]!.length]);
      // Without partNumber: the whole object, no parts count.
      const all = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'multi.bin' }));
      expect([all.$metadata.httpStatusCode, all.PartsCount]).to.deep.equal([200, undefined]);
      expect((await bodyBytes(all)).equals(whole)).to.equal(true);
    });

    it('GetObjectAttributes gives a multipart object without a checksum its parts count only (as S3); a bad x-amz-max-parts is InvalidArgument', async () => {
      const attrs = await env.s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: 'multi.bin', ObjectAttributes: ['ObjectParts', 'ObjectSize'] }));
      expect([attrs.ObjectParts?.TotalPartsCount, attrs.ObjectParts?.Parts, attrs.ObjectSize]).to.deep.equal([3, undefined, whole.length]);
      const headers = { 'x-amz-object-attributes': 'ObjectParts', 'x-amz-max-parts': 'many' };
      const url = rootPresign(env.p.endpoint, 'GET', `/${bucket}/multi.bin`, { extraQuery: [['attributes', '']], headers });
      const r = await fetch(url, { headers });
      expect([r.status, s3ErrorOf(await r.text()).code]).to.deep.equal([400, 'InvalidArgument']);
    });

    it('a part past the last is InvalidPartNumber (416); an object uploaded whole is its own part 1', async () => {
      expect(await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'multi.bin', PartNumber: 4 })))).to.deep.equal({
        name: 'InvalidPartNumber',
        status: 416,
      });
      const one = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'single.bin', PartNumber: 1 }));
      expect([one.PartsCount, one.ContentLength]).to.deep.equal([undefined, parts[2]!.length]);
      expect((await bodyBytes(one)).equals(parts[2]!)).to.equal(true);
      expect(await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'single.bin', PartNumber: 2 })))).to.deep.equal({
        name: 'InvalidPartNumber',
        status: 416,
      });
      expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'single.bin', PartNumber: 2 })))).status).to.equal(416);
      // An empty object's part 1 is empty.
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'empty', Body: '' }));
      const empty = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'empty', PartNumber: 1 }));
      expect((await bodyBytes(empty)).length).to.equal(0);
    });

    it('refuses a part number outside 1..10000 or not a number (InvalidArgument) and one with a Range (InvalidRequest)', async () => {
      for (const bad of ['0', '10001', 'abc', '-1', '1.5', '']) {
        const r = await fetch(signed('multi.bin', [['partNumber', bad]]));
        const text = await r.text();
        expect([r.status, s3ErrorOf(text).code], `partNumber=${bad}`).to.deep.equal([400, 'InvalidArgument']);
      }
      expect(await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'multi.bin', PartNumber: 1, Range: 'bytes=0-9' })))).to.deep.equal({
        name: 'InvalidRequest',
        status: 400,
      });
    });

    it('a copy keeps the parts (it keeps the -N ETag); an overwrite by a single PUT drops them', async () => {
      await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy.bin', CopySource: `${bucket}/multi.bin` }));
      const part3 = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'copy.bin', PartNumber: 3 }));
      expect(part3.PartsCount).to.equal(3);
      expect((await bodyBytes(part3)).equals(parts[2]!)).to.equal(true);
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'copy.bin', Body: 'one piece now' }));
      expect(await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'copy.bin', PartNumber: 2 })))).to.deep.equal({
        name: 'InvalidPartNumber',
        status: 416,
      });
    });

    it('a Bearer GET of one part is redirected to a presigned URL of that part', async () => {
      const token = await login(env.p.endpoint);
      const r = await fetch(`${env.p.endpoint}/${bucket}/multi.bin?partNumber=2`, { headers: { authorization: `Bearer ${token}` }, redirect: 'manual' });
      expect(r.status).to.equal(302);
      const location = r.headers.get('location')!;
      expect(new URL(location).searchParams.get('partNumber')).to.equal('2');
      const followed = await fetch(location);
      expect([followed.status, followed.headers.get('x-amz-mp-parts-count')]).to.deep.equal([206, '3']);
      expect(Buffer.from(await followed.arrayBuffer()).equals(parts[1]!)).to.equal(true);
      const proxied = await fetch(`${env.p.endpoint}/${bucket}/multi.bin?partNumber=3&proxy=true`, { headers: { authorization: `Bearer ${token}` } });
      expect(Buffer.from(await proxied.arrayBuffer()).equals(parts[2]!)).to.equal(true);
    });
  },
  180_000,
);
