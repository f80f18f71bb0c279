import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { filesUnder } from '../support/temp-dir.js';
import { bodyText, describeWithBucket, expectAbsent, md5Hex, rootPresign, s3ErrorOf, s3Failure, tenantHooks } from './support/s3.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * How bytes move, checked on the wire: range edge cases, uploads streamed end to end, multipart
 * bookkeeping, presigned PUT expiry and tampering, and the Bearer presign route.
 */
describeWithBucket('e2e: object transfer on the wire (ranges, streamed uploads, multipart, presigned URLs)', 'details', (env, bucket) => {
  const bob = tenantHooks(env, 'bob');
  const auth = () => ({ authorization: `Bearer ${env.token}` });

  it('range GET edge cases: open end, end past the size, one byte, invalid or reversed ranges serve everything', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'range.txt', Body: '0123456789abcdefghij' }));
    const get = (Range: string) => env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range }));
    const open = await get('bytes=5-');
    expect(await bodyText(open)).to.equal('56789abcdefghij');
    expect(open.ContentRange).to.equal('bytes 5-19/20');
    const past = await get('bytes=15-100');
    expect(await bodyText(past)).to.equal('fghij');
    expect(past.ContentRange).to.equal('bytes 15-19/20');
    expect(past.ContentLength).to.equal(5);
    const one = await get('bytes=0-0');
    expect(await bodyText(one)).to.equal('0');
    expect(one.$metadata.httpStatusCode).to.equal(206);
    const longSuffix = await get('bytes=-50');
    expect(await bodyText(longSuffix)).to.equal('0123456789abcdefghij');
    for (const ignored of ['bytes=abc', 'bytes=9-5', 'bytes=0-1,3-4', 'items=0-3']) {
      const r = await get(ignored);
      expect(r.$metadata.httpStatusCode, ignored).to.equal(200);
      expect(await bodyText(r), ignored).to.equal('0123456789abcdefghij');
    }
    expect((await s3Failure(get('bytes=20-'))).status).to.equal(416);
    expect((await s3Failure(get('bytes=-0'))).status).to.equal(416);
    const head = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=2-4' }));
    expect(head.ContentLength).to.equal(3);
    const proxied = await fetch(`${env.p.endpoint}/${bucket}/range.txt?proxy=true`, { headers: { ...auth(), range: 'bytes=10-12' } });
    expect(proxied.status).to.equal(206);
    expect(await proxied.text()).to.equal('abc');
  });

  it('uploads stream end to end: bytes reach the storage backend while the client is still sending', async () => {
    const body = randomBytes(16 * 1024 * 1024);
    const u = new URL(env.p.endpoint);
    const tempBytes = async () => {
      let most = 0;
      for (const f of await filesUnder(path.join(env.p.dataDir, 'blobs'))) {
        if (f.endsWith('.tmp')) most = Math.max(most, (await stat(path.join(env.p.dataDir, 'blobs', f)).catch(() => ({ size: 0 }))).size);
      }
      return most;
    };
    let seenWhileSending = 0;
    const answer = await new Promise<{ status: number; etag: string }>((resolve, reject) => {
      const req = http.request(
        { host: u.hostname, port: u.port, method: 'PUT', path: `/${bucket}/streamed.bin`, headers: { ...auth(), 'content-length': body.length } },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag) }));
        },
      );
      req.on('error', reject);
      req.write(body.subarray(0, body.length / 2), async () => {
        // Half the body is out and the request is still open: a buffering hop would have stored nothing yet.
        for (let i = 0; i < 200 && seenWhileSending < 4 * 1024 * 1024; i++) {
          seenWhileSending = await tempBytes();
          await new Promise((r) => setTimeout(r, 50));
        }
        req.end(body.subarray(body.length / 2));
      });
    });
    expect(seenWhileSending, 'bytes in the backend temp file before the body ended').to.be.at.least(4 * 1024 * 1024);
    expect(answer).to.deep.equal({ status: 200, etag: `"${md5Hex(body)}"` });
    expect(await tempBytes()).to.equal(0);
  });

  it('multipart: UUID v7 upload ids, parts listed page by page, uploads by prefix, abort leaves no part file', async () => {
    const partsBefore = await filesUnder(path.join(env.p.dataDir, 'blobs', 'parts'));
    const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mpu/one.bin' }));
    const { UploadId: other } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'elsewhere.bin' }));
    expect(UploadId).to.match(UUID_V7);
    expect(other).to.match(UUID_V7);
    for (const PartNumber of [1, 2, 3])
      await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId, PartNumber, Body: randomBytes(1000 + PartNumber) }));
    expect((await filesUnder(path.join(env.p.dataDir, 'blobs', 'parts'))).length).to.equal(partsBefore.length + 3);
    // A part whose Content-MD5 does not match is BadDigest and leaves no part behind.
    const wrongMd5 = Buffer.from(md5Hex('not this part'), 'hex').toString('base64');
    expect(
      (
        await s3Failure(
          env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId, PartNumber: 4, Body: randomBytes(2000), ContentMD5: wrongMd5 })),
        )
      ).name,
    ).to.equal('BadDigest');
    expect((await filesUnder(path.join(env.p.dataDir, 'blobs', 'parts'))).length).to.equal(partsBefore.length + 3);
    expect((await filesUnder(env.p.dataDir)).filter((f) => f.endsWith('.tmp'))).to.deep.equal([]);

    const numbers: number[] = [];
    let marker: string | undefined;
    for (;;) {
      const page = await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId, MaxParts: 2, PartNumberMarker: marker }));
      numbers.push(...(page.Parts ?? []).map((x) => x.PartNumber!));
      if (!page.IsTruncated) break;
      marker = String(page.NextPartNumberMarker);
    }
    expect(numbers).to.deep.equal([1, 2, 3]);
    const byPrefix = await env.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: 'mpu/' }));
    expect(byPrefix.Uploads?.map((u) => [u.Key, u.UploadId])).to.deep.equal([['mpu/one.bin', UploadId]]);

    await env.s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId }));
    await env.s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'elsewhere.bin', UploadId: other }));
    expect(await filesUnder(path.join(env.p.dataDir, 'blobs', 'parts'))).to.deep.equal(partsBefore);
    expect((await filesUnder(env.p.dataDir)).filter((f) => f.endsWith('.tmp'))).to.deep.equal([]);
    expect((await s3Failure(env.s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId })))).name).to.equal('NoSuchUpload');
    expect((await env.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: 'mpu/' }))).Uploads ?? []).to.have.length(0);
  });

  it('presigned PUT: works once, refused when expired or pointed at another key, stores nothing then', async () => {
    const sign = (key: string, now?: Date) => rootPresign(env.p.endpoint, 'PUT', `/${bucket}/${key}`, { now });
    expect((await fetch(sign('presigned/ok.txt'), { method: 'PUT', body: 'ok' })).status).to.equal(200);
    const expired = await fetch(sign('presigned/expired.txt', new Date(Date.now() - 3600_000)), { method: 'PUT', body: 'late' });
    expect(expired.status).to.equal(403);
    expect(s3ErrorOf(await expired.text())).to.deep.equal({ code: 'AccessDenied', message: 'Request has expired' });
    const tampered = await fetch(sign('presigned/ok.txt').replace('presigned/ok.txt', 'presigned/other.txt'), { method: 'PUT', body: 'sneaky' });
    expect(tampered.status).to.equal(403);
    expect(s3ErrorOf(await tampered.text()).code).to.equal('SignatureDoesNotMatch');
    const widened = new URL(sign('presigned/ok.txt'));
    widened.searchParams.set('X-Amz-Expires', '604800');
    expect((await fetch(widened, { method: 'PUT', body: 'longer' })).status).to.equal(403);
    for (const key of ['presigned/expired.txt', 'presigned/other.txt']) await expectAbsent(env.s3, bucket, key);
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'presigned/ok.txt' })))).to.equal('ok');
  });

  it('Bearer ?presign: the URL carries the asked expiry; refused without a token or on another tenant’s bucket', async () => {
    const before = Date.now();
    const r = await fetch(`${env.p.endpoint}/${bucket}/presigned/ok.txt?presign&method=GET&expires=120`, { headers: auth() });
    expect(r.status).to.equal(200);
    const { url, expiresAt } = ((await r.json()) as { data: { url: string; expiresAt: string } }).data;
    expect(new URL(url).searchParams.get('X-Amz-Expires')).to.equal('120');
    expect(Date.parse(expiresAt) - before).to.be.within(119_000, 180_000);
    expect(await (await fetch(url)).text()).to.equal('ok');
    const anonymous = await fetch(`${env.p.endpoint}/${bucket}/presigned/ok.txt?presign&method=GET`);
    expect(anonymous.status).to.equal(403);
    const foreign = await fetch(`${env.p.endpoint}/${bucket}/presigned/ok.txt?presign&method=PUT`, { headers: { authorization: `Bearer ${bob.token}` } });
    expect(foreign.status).to.equal(403);
    expect(((await foreign.json()) as { error: { code: string } }).error.code).to.equal('AccessDenied');
    for (const expires of ['0', '-5', 'soon']) {
      const bad = await fetch(`${env.p.endpoint}/${bucket}/presigned/ok.txt?presign&method=GET&expires=${expires}`, { headers: auth() });
      expect(bad.status, expires).to.equal(400);
    }
  });
});
