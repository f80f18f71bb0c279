import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteBucketPolicyCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketPolicyCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutBucketAclCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectRetentionCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { rawRequest } from '../support/http.js';
import { filesUnder } from '../support/temp-dir.js';
import { startTestPlatform, ROOT_PASSWORD, ROOT_USER, type TestPlatform } from './support/platform.js';
import { bodyBytes, bucketName, login, md5Hex, s3ErrorOf, s3Failure, sdkClient } from './support/s3.js';

/**
 * The S3 details clients depend on, checked on the wire: every ListObjects parameter (the raw XML for
 * encoding-type=url), range edge cases, multipart bookkeeping, presigned PUT expiry and tampering,
 * the Bearer presign route, instant upload across tenants, recycle bin and purge freeing bytes only
 * when unreferenced, tenant isolation on every path, and the NotImplemented / fixed-ACL answers.
 */

async function bodyText(r: { Body?: unknown }): Promise<string> {
  return (await bodyBytes(r)).toString();
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const DAY = 24 * 3600_000;

describe('e2e: S3 details on the wire (listing, ranges, multipart, presign, instant upload, recycle bin, isolation)', function () {
  this.timeout(120_000);
  let p: TestPlatform;
  let s3: S3Client;
  let token: string;
  let bob: { accessKey: string; secretKey: string; token: string; s3: S3Client };
  const bucket = bucketName('details');
  const auth = () => ({ authorization: `Bearer ${token}` });
  const blobFiles = async () => (await filesUnder(path.join(p.dataDir, 'blobs'))).filter((f) => !f.startsWith('parts') && !f.endsWith('.tmp'));

  before(async () => {
    p = await startTestPlatform();
    s3 = sdkClient(p.endpoint);
    token = await login(p.endpoint);
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const created = await fetch(`${p.endpoint}/admin/users`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bob', password: 'bob-password-1' }),
    });
    expect(created.status).to.equal(201);
    const data = ((await created.json()) as { data: { accessKey: string; secretKey: string } }).data;
    bob = { ...data, token: await login(p.endpoint, 'bob', 'bob-password-1'), s3: sdkClient(p.endpoint, data.accessKey, data.secretKey) };
  });
  after(async () => {
    s3?.destroy();
    bob?.s3.destroy();
    await p?.destroy();
  });

  describe('ListObjects', () => {
    const b = bucketName('listing');
    const list = async (query: string) => {
      const r = await fetch(`${p.endpoint}/${b}?${query}`, { headers: auth() });
      return { status: r.status, xml: await r.text() };
    };
    const tags = (xml: string, tag: string) => [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, 'g'))].map((m) => m[1]);

    before(async () => {
      await s3.send(new CreateBucketCommand({ Bucket: b }));
      for (const Key of ['a/1', 'a/2', 'a/b/3', 'B', 'c d/+4', 'c d/e&f', 'z', 'é']) await s3.send(new PutObjectCommand({ Bucket: b, Key, Body: Key }));
    });

    it('encoding-type=url encodes keys, prefixes, delimiter and start-after in the XML itself', async () => {
      const v2 = await list('list-type=2&encoding-type=url&prefix=c%20d%2F');
      expect(v2.status).to.equal(200);
      expect(tags(v2.xml, 'Key')).to.deep.equal(['c%20d/%2B4', 'c%20d/e%26f']);
      expect(tags(v2.xml, 'Prefix')).to.deep.equal(['c%20d/']);
      expect(tags(v2.xml, 'EncodingType')).to.deep.equal(['url']);
      const grouped = await list('list-type=2&encoding-type=url&delimiter=%2F&start-after=B');
      // Byte order: 'B' < 'a/...' < 'c d/...' < 'z' < 'é'.
      expect(tags(grouped.xml, 'Prefix')).to.deep.equal(['', 'a/', 'c%20d/']);
      expect(tags(grouped.xml, 'StartAfter')).to.deep.equal(['B']);
      expect(tags(grouped.xml, 'Key')).to.deep.equal(['z', '%C3%A9']);
      // Without encoding-type the same keys come back as they are (XML-escaped only).
      const plain = await list('list-type=2&prefix=c%20d%2F');
      expect(tags(plain.xml, 'Key')).to.deep.equal(['c d/+4', 'c d/e&amp;f']);
      expect(plain.xml).not.to.contain('<EncodingType>');
      const v1 = await list('encoding-type=url&prefix=c%20d%2F');
      expect(tags(v1.xml, 'Key')).to.deep.equal(['c%20d/%2B4', 'c%20d/e%26f']);
    });

    it('fetch-owner adds Owner only when asked; max-keys 0, bad max-keys, bad encoding and unknown tokens', async () => {
      expect((await list('list-type=2&prefix=a%2F')).xml).not.to.contain('<Owner>');
      const owned = await list('list-type=2&prefix=a%2F&fetch-owner=true');
      expect(tags(owned.xml, 'ID')).to.deep.equal(['strata', 'strata', 'strata']);
      const none = await list('list-type=2&max-keys=0');
      expect(none.status).to.equal(200);
      expect(tags(none.xml, 'KeyCount')).to.deep.equal(['0']);
      expect(none.xml).not.to.contain('<Contents>');
      const over = await list('list-type=2&max-keys=5000');
      expect(tags(over.xml, 'MaxKeys')).to.deep.equal(['1000']);
      expect(tags(over.xml, 'Key')).to.have.length(8);
      for (const bad of [
        'list-type=2&max-keys=abc',
        'list-type=2&max-keys=-1',
        'list-type=2&encoding-type=base64',
        'list-type=2&continuation-token=not-a-token',
      ]) {
        const r = await list(bad);
        expect(r.status, bad).to.equal(400);
        expect(s3ErrorOf(r.xml).code, bad).to.equal('InvalidArgument');
      }
    });

    it('v2 pages with delimiter: common prefixes count toward max-keys and are never repeated', async () => {
      const seenKeys: string[] = [];
      const seenPrefixes: string[] = [];
      let token: string | undefined;
      do {
        const page = await s3.send(new ListObjectsV2Command({ Bucket: b, Delimiter: '/', MaxKeys: 1, ContinuationToken: token }));
        expect((page.Contents ?? []).length + (page.CommonPrefixes ?? []).length).to.be.at.most(1);
        expect(page.KeyCount).to.equal((page.Contents ?? []).length + (page.CommonPrefixes ?? []).length);
        seenKeys.push(...(page.Contents ?? []).map((o) => o.Key!));
        seenPrefixes.push(...(page.CommonPrefixes ?? []).map((c) => c.Prefix!));
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      expect(seenPrefixes).to.deep.equal(['a/', 'c d/']);
      expect(seenKeys).to.deep.equal(['B', 'z', 'é']);
    });

    it('v1 with a delimiter answers NextMarker and pages over common prefixes', async () => {
      const first = await list('delimiter=%2F&max-keys=2');
      expect(tags(first.xml, 'IsTruncated')).to.deep.equal(['true']);
      expect(tags(first.xml, 'Key')).to.deep.equal(['B']);
      expect(tags(first.xml, 'Prefix').slice(1)).to.deep.equal(['a/']);
      expect(tags(first.xml, 'NextMarker')).to.deep.equal(['a/']);
      // A marker that is a common prefix skips everything under it.
      const second = await list('delimiter=%2F&max-keys=2&marker=a%2F');
      expect(tags(second.xml, 'Prefix').slice(1)).to.deep.equal(['c d/']);
      expect(tags(second.xml, 'Key')).to.deep.equal(['z']);
      expect(tags(second.xml, 'NextMarker')).to.deep.equal(['z']);
      const third = await list('delimiter=%2F&max-keys=2&marker=z');
      expect(tags(third.xml, 'Key')).to.deep.equal(['é']);
      expect(tags(third.xml, 'IsTruncated')).to.deep.equal(['false']);
      expect(third.xml).not.to.contain('<NextMarker>');
    });
  });

  it('range GET edge cases: open end, end past the size, one byte, invalid or reversed ranges serve everything', async () => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'range.txt', Body: '0123456789abcdefghij' }));
    const get = (Range: string) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range }));
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
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=2-4' }));
    expect(head.ContentLength).to.equal(3);
    const proxied = await fetch(`${p.endpoint}/${bucket}/range.txt?proxy=true`, { headers: { ...auth(), range: 'bytes=10-12' } });
    expect(proxied.status).to.equal(206);
    expect(await proxied.text()).to.equal('abc');
  });

  it('uploads stream end to end: bytes reach the storage backend while the client is still sending', async () => {
    const body = randomBytes(16 * 1024 * 1024);
    const u = new URL(p.endpoint);
    const tempBytes = async () => {
      let most = 0;
      for (const f of await filesUnder(path.join(p.dataDir, 'blobs'))) {
        if (f.endsWith('.tmp')) most = Math.max(most, (await stat(path.join(p.dataDir, 'blobs', f)).catch(() => ({ size: 0 }))).size);
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
    const partsBefore = await filesUnder(path.join(p.dataDir, 'blobs', 'parts'));
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mpu/one.bin' }));
    const { UploadId: other } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'elsewhere.bin' }));
    expect(UploadId).to.match(UUID_V7);
    expect(other).to.match(UUID_V7);
    for (const PartNumber of [1, 2, 3])
      await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId, PartNumber, Body: randomBytes(1000 + PartNumber) }));
    expect((await filesUnder(path.join(p.dataDir, 'blobs', 'parts'))).length).to.equal(partsBefore.length + 3);
    // A part whose Content-MD5 does not match is BadDigest and leaves no part behind.
    const wrongMd5 = Buffer.from(md5Hex('not this part'), 'hex').toString('base64');
    expect(
      (
        await s3Failure(
          s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId, PartNumber: 4, Body: randomBytes(2000), ContentMD5: wrongMd5 })),
        )
      ).name,
    ).to.equal('BadDigest');
    expect((await filesUnder(path.join(p.dataDir, 'blobs', 'parts'))).length).to.equal(partsBefore.length + 3);
    expect((await filesUnder(p.dataDir)).filter((f) => f.endsWith('.tmp'))).to.deep.equal([]);

    const numbers: number[] = [];
    let marker: string | undefined;
    for (;;) {
      const page = await s3.send(new ListPartsCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId, MaxParts: 2, PartNumberMarker: marker }));
      numbers.push(...(page.Parts ?? []).map((x) => x.PartNumber!));
      if (!page.IsTruncated) break;
      marker = String(page.NextPartNumberMarker);
    }
    expect(numbers).to.deep.equal([1, 2, 3]);
    const byPrefix = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: 'mpu/' }));
    expect(byPrefix.Uploads?.map((u) => [u.Key, u.UploadId])).to.deep.equal([['mpu/one.bin', UploadId]]);

    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId }));
    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'elsewhere.bin', UploadId: other }));
    expect(await filesUnder(path.join(p.dataDir, 'blobs', 'parts'))).to.deep.equal(partsBefore);
    expect((await filesUnder(p.dataDir)).filter((f) => f.endsWith('.tmp'))).to.deep.equal([]);
    expect((await s3Failure(s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'mpu/one.bin', UploadId })))).name).to.equal('NoSuchUpload');
    expect((await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: 'mpu/' }))).Uploads ?? []).to.have.length(0);
  });

  it('presigned PUT: works once, refused when expired or pointed at another key, stores nothing then', async () => {
    const sign = (key: string, now?: Date) =>
      presignUrl({
        method: 'PUT',
        origin: p.endpoint,
        path: `/${bucket}/${key}`,
        accessKey: ROOT_USER,
        secret: ROOT_PASSWORD,
        region: 'us-east-1',
        expiresSeconds: 60,
        now,
      });
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
    for (const key of ['presigned/expired.txt', 'presigned/other.txt'])
      expect((await s3Failure(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })))).status).to.equal(404);
    expect(await bodyText(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'presigned/ok.txt' })))).to.equal('ok');
  });

  it('Bearer ?presign: the URL carries the asked expiry; refused without a token or on another tenant’s bucket', async () => {
    const before = Date.now();
    const r = await fetch(`${p.endpoint}/${bucket}/presigned/ok.txt?presign&method=GET&expires=120`, { headers: auth() });
    expect(r.status).to.equal(200);
    const { url, expiresAt } = ((await r.json()) as { data: { url: string; expiresAt: string } }).data;
    expect(new URL(url).searchParams.get('X-Amz-Expires')).to.equal('120');
    expect(Date.parse(expiresAt) - before).to.be.within(119_000, 180_000);
    expect(await (await fetch(url)).text()).to.equal('ok');
    const anonymous = await fetch(`${p.endpoint}/${bucket}/presigned/ok.txt?presign&method=GET`);
    expect(anonymous.status).to.equal(403);
    const foreign = await fetch(`${p.endpoint}/${bucket}/presigned/ok.txt?presign&method=PUT`, { headers: { authorization: `Bearer ${bob.token}` } });
    expect(foreign.status).to.equal(403);
    expect(((await foreign.json()) as { error: { code: string } }).error.code).to.equal('AccessDenied');
    for (const expires of ['0', '-5', 'soon']) {
      const bad = await fetch(`${p.endpoint}/${bucket}/presigned/ok.txt?presign&method=GET&expires=${expires}`, { headers: auth() });
      expect(bad.status, expires).to.equal(400);
    }
  });

  it('instant upload never hits on another tenant’s blob: the body is read and checked instead', async () => {
    const content = randomBytes(64 * 1024);
    const md5 = md5Hex(content);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'instant/root.bin', Body: content }));
    const bobBucket = bucketName('bob-instant');
    await bob.s3.send(new CreateBucketCommand({ Bucket: bobBucket }));
    const bobPut = (key: string, body: Buffer) =>
      fetch(`${p.endpoint}/${bobBucket}/${key}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${bob.token}`, 'x-service-md5': md5 },
        body: body as unknown as BodyInit,
      });

    // Knowing root's MD5 gets bob nothing: a body of the same size but other bytes is BadDigest.
    const claim = await bobPut('claimed.bin', Buffer.alloc(content.length));
    expect(claim.status).to.equal(400);
    expect(s3ErrorOf(await claim.text()).code).to.equal('BadDigest');
    expect((await s3Failure(bob.s3.send(new HeadObjectCommand({ Bucket: bobBucket, Key: 'claimed.bin' })))).status).to.equal(404);
    // Bob's first upload of the real bytes is a miss (read and hashed), his second one a hit.
    const first = await bobPut('first.bin', content);
    expect(((await first.json()) as { data: { instant: boolean } }).data.instant).to.equal(false);
    const second = await bobPut('second.bin', content);
    expect(((await second.json()) as { data: { instant: boolean } }).data.instant).to.equal(true);
    const back = await bob.s3.send(new GetObjectCommand({ Bucket: bobBucket, Key: 'second.bin' }));
    expect(Buffer.from(await back.Body!.transformToByteArray()).equals(content)).to.equal(true);
  });

  it('recycle bin: delete hides from GET and LIST, restore brings back; purge frees bytes only when no object references them', async () => {
    const b = bucketName('recycle');
    await s3.send(new CreateBucketCommand({ Bucket: b }));
    // Above the 64 KiB kept inline in the database: the bytes are a file, and its removal is checked.
    const content = randomBytes(96 * 1024);
    const before = await blobFiles();
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'one.bin', Body: content }));
    const added = (await blobFiles()).filter((f) => !before.includes(f));
    expect(added).to.have.length(1);
    // Same bytes again: stored once (server-side dedupe), two objects share the blob.
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'two.bin', Body: content }));
    expect((await blobFiles()).filter((f) => !before.includes(f))).to.deep.equal(added);

    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'one.bin' }));
    expect((await s3Failure(s3.send(new GetObjectCommand({ Bucket: b, Key: 'one.bin' })))).name).to.equal('NoSuchKey');
    expect(((await s3.send(new ListObjectsV2Command({ Bucket: b }))).Contents ?? []).map((o) => o.Key)).to.deep.equal(['two.bin']);
    const binOf = async () =>
      (
        (await (await fetch(`${p.endpoint}/admin/recycle-bin?bucket=${b}`, { headers: auth() })).json()) as {
          data: { objects: Array<{ id: string; key: string; size: number }> };
        }
      ).data.objects;
    const bin = await binOf();
    expect(bin.map((o) => [o.key, o.size])).to.deep.equal([['one.bin', content.length]]);
    // Another tenant can neither see this bin nor restore from it.
    expect((await fetch(`${p.endpoint}/admin/recycle-bin?bucket=${b}`, { headers: { authorization: `Bearer ${bob.token}` } })).status).to.equal(403);
    expect(
      (await fetch(`${p.endpoint}/admin/recycle-bin/${bin[0].id}/restore`, { method: 'POST', headers: { authorization: `Bearer ${bob.token}` } })).status,
    ).to.equal(404);
    const restored = await fetch(`${p.endpoint}/admin/recycle-bin/${bin[0].id}/restore`, { method: 'POST', headers: auth() });
    expect(restored.status).to.equal(200);
    expect((await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'one.bin' }))).ContentLength).to.equal(content.length);
    expect(await binOf()).to.deep.equal([]);

    const purge = async (days: number) => {
      const r = await fetch(`${p.endpoint}/admin/purge`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: JSON.stringify({ now: new Date(Date.now() + days * DAY).toISOString() }),
      });
      expect(r.status).to.equal(200);
      return ((await r.json()) as { data: { purged: number; freedBlobs: number } }).data;
    };
    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'one.bin' }));
    expect((await purge(29)).purged, 'younger than 30 days: kept').to.equal(0);
    expect(await binOf()).to.have.length(1);
    expect((await purge(31)).purged).to.be.at.least(1);
    expect(await binOf()).to.deep.equal([]);
    expect(
      (await blobFiles()).filter((f) => !before.includes(f)),
      'two.bin still references the bytes',
    ).to.deep.equal(added);
    // (The body is read: the SDK checks it against the stored checksum, and an abandoned one errors when the platform stops.)
    expect((await bodyBytes(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'two.bin' })))).equals(content)).to.equal(true);

    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'two.bin' }));
    const last = await purge(31);
    expect(last.purged).to.be.at.least(1);
    expect(last.freedBlobs).to.be.at.least(1);
    expect(
      (await blobFiles()).filter((f) => !before.includes(f)),
      'bytes freed',
    ).to.deep.equal([]);
    await s3.send(new DeleteBucketCommand({ Bucket: b }));
  });

  it('tenant isolation on every path: objects, copies, deletes, multipart, ACLs and the bucket itself', async () => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'private.txt', Body: 'root only' }));
    const bobBucket = bucketName('bob-own');
    await bob.s3.send(new CreateBucketCommand({ Bucket: bobBucket }));
    const denied = async (name: string, call: Promise<unknown>) => expect((await s3Failure(call)).name, name).to.equal('AccessDenied');
    // HEAD answers carry no body: the status says it.
    expect((await s3Failure(bob.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'private.txt' })))).status).to.equal(403);
    await denied('DeleteObject', bob.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'private.txt' })));
    await denied('DeleteObjects', bob.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'private.txt' }] } })));
    await denied('CopyObject from root', bob.s3.send(new CopyObjectCommand({ Bucket: bobBucket, Key: 'stolen.txt', CopySource: `${bucket}/private.txt` })));
    await denied('CopyObject into root', bob.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'planted.txt', CopySource: `${bobBucket}/x` })));
    await denied('CreateMultipartUpload', bob.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mp.bin' })));
    await denied('ListMultipartUploads', bob.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket })));
    await denied('GetObjectAcl', bob.s3.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'private.txt' })));
    await denied('DeleteBucket', bob.s3.send(new DeleteBucketCommand({ Bucket: bucket })));
    const viaProxy = await fetch(`${p.endpoint}/${bucket}/private.txt?proxy=true`, { headers: { authorization: `Bearer ${bob.token}` } });
    expect(viaProxy.status).to.equal(403);
    const viaRedirect = await fetch(`${p.endpoint}/${bucket}/private.txt`, { headers: { authorization: `Bearer ${bob.token}` }, redirect: 'manual' });
    expect(viaRedirect.status).to.equal(403);
    expect(await bodyText(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'private.txt' })))).to.equal('root only');
    expect((await s3Failure(s3.send(new HeadObjectCommand({ Bucket: bobBucket, Key: 'stolen.txt' })))).status).to.equal(403);
    expect((await bob.s3.send(new ListObjectsV2Command({ Bucket: bobBucket }))).KeyCount).to.equal(0);
    // Non-root users cannot create users.
    const eve = await fetch(`${p.endpoint}/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bob.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'eve', password: 'eve-password-1' }),
    });
    expect(eve.status).to.equal(403);
  });

  it('POST /admin/users: a taken name and bad bodies are clear JSON errors; the new user signs with the keys answered', async () => {
    const post = (body: string, headers: Record<string, string> = auth()) =>
      fetch(`${p.endpoint}/admin/users`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
    const taken = await post(JSON.stringify({ username: 'bob', password: 'another-password' }));
    expect(taken.status).to.be.within(400, 409);
    expect(((await taken.json()) as { error: { code: string } }).error.code).to.be.a('string');
    for (const bad of ['{"username":"x"}', '{"username":"","password":"p"}', '[]', '{not json']) {
      const r = await post(bad);
      expect(r.status, bad).to.equal(400);
      expect(((await r.json()) as { error: { code: string } }).error.code, bad).to.be.oneOf(['InvalidArgument', 'MalformedJSON']);
    }
    expect((await post(JSON.stringify({ username: 'x2', password: 'pw-123456' }), {})).status).to.equal(403);
    // The same call signed with SigV4 (root's access key = root user name).
    const signed = await fetch(
      presignUrl({
        method: 'POST',
        origin: p.endpoint,
        path: '/admin/users',
        accessKey: ROOT_USER,
        secret: ROOT_PASSWORD,
        region: 'us-east-1',
        expiresSeconds: 60,
      }),
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'dave', password: 'dave-password-1' }) },
    );
    expect(signed.status).to.equal(201);
    const dave = ((await signed.json()) as { data: { username: string; accessKey: string; secretKey: string } }).data;
    expect(dave.username).to.equal('dave');
    expect(dave.accessKey).to.be.a('string').and.not.equal(dave.secretKey);
    const daveS3 = sdkClient(p.endpoint, dave.accessKey, dave.secretKey);
    await daveS3.send(new CreateBucketCommand({ Bucket: bucketName('dave') }));
    daveS3.destroy();
  });

  it('NotImplemented for every versioning, policy, lock and ACL write; ?acl is a fixed private ACL, never the object', async () => {
    const attempts: Array<[string, () => Promise<unknown>]> = [
      ['PutBucketVersioning Suspended', () => s3.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Suspended' } }))],
      ['PutBucketAcl', () => s3.send(new PutBucketAclCommand({ Bucket: bucket, ACL: 'public-read' }))],
      ['GetBucketPolicy', () => s3.send(new GetBucketPolicyCommand({ Bucket: bucket }))],
      ['DeleteBucketPolicy', () => s3.send(new DeleteBucketPolicyCommand({ Bucket: bucket }))],
      [
        'PutObjectRetention',
        () =>
          s3.send(
            new PutObjectRetentionCommand({ Bucket: bucket, Key: 'range.txt', Retention: { Mode: 'GOVERNANCE', RetainUntilDate: new Date(Date.now() + DAY) } }),
          ),
      ],
      ['PutObjectLegalHold', () => s3.send(new PutObjectLegalHoldCommand({ Bucket: bucket, Key: 'range.txt', LegalHold: { Status: 'ON' } }))],
    ];
    for (const [name, attempt] of attempts) expect(await s3Failure(attempt()), name).to.deep.equal({ name: 'NotImplemented', status: 501 });
    const versioning = await fetch(`${p.endpoint}/${bucket}?versioning`, { headers: auth() });
    expect(await versioning.text()).to.match(/<VersioningConfiguration[^>]*\/>|<VersioningConfiguration[^>]*><\/VersioningConfiguration>/);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'acl.txt', Body: 'SECRET OBJECT BYTES' }));
    const acl = await fetch(`${p.endpoint}/${bucket}/acl.txt?acl`, { headers: auth(), redirect: 'manual' });
    expect(acl.status).to.equal(200);
    const xml = await acl.text();
    expect(xml).to.contain('<AccessControlPolicy').and.contain('<Permission>FULL_CONTROL</Permission>');
    expect(xml).not.to.contain('SECRET OBJECT BYTES');
    expect((await s3Failure(s3.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'no-such.txt' })))).name).to.equal('NoSuchKey');
    expect(await bodyText(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'acl.txt' })))).to.equal('SECRET OBJECT BYTES');
  });

  it('bad keys on every operation: ".." segments and NUL are InvalidObjectName, DeleteObjects reports them per key', async () => {
    const h = auth();
    for (const [method, target] of [
      ['GET', `/${bucket}/a/../b?proxy=true`],
      ['HEAD', `/${bucket}/a/%2E%2E/b`],
      ['DELETE', `/${bucket}/..`],
      ['POST', `/${bucket}/x%00y?uploads`],
    ] as const) {
      const r = await rawRequest(p.endpoint, method, target, h);
      expect(r.status, `${method} ${target}`).to.equal(400);
      if (method !== 'HEAD') expect(s3ErrorOf(r.body).code, `${method} ${target}`).to.equal('InvalidObjectName');
    }
    const copy = await rawRequest(p.endpoint, 'PUT', `/${bucket}/copy-target`, { ...h, 'x-amz-copy-source': `/${bucket}/a/../range.txt` });
    expect(s3ErrorOf(copy.body).code).to.equal('InvalidObjectName');
    // A DTD (external entity) in a request document is MalformedXML, not a server error.
    const xxe = await rawRequest(
      p.endpoint,
      'POST',
      `/${bucket}?delete`,
      h,
      '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><Delete><Object><Key>&x;</Key></Object></Delete>',
    );
    expect([xxe.status, s3ErrorOf(xxe.body).code]).to.deep.equal([400, 'MalformedXML']);
    const quiet = await s3.send(
      new DeleteObjectsCommand({ Bucket: bucket, Delete: { Quiet: true, Objects: [{ Key: 'fine-to-delete' }, { Key: 'bad/../key' }] } }),
    );
    expect(quiet.Deleted ?? []).to.have.length(0);
    expect(quiet.Errors?.map((e) => [e.Key, e.Code])).to.deep.equal([['bad/../key', 'InvalidObjectName']]);
    expect((await s3Failure(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copy-target' })))).status).to.equal(404);
  });
});
