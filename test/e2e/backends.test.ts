import { createHash, randomBytes, randomUUID } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { freePorts } from '../support/ports.js';
import { s3ClientFor, sharedRgw, startS3rver, type S3ServerHarness } from '../support/rgw.js';
import { startTestPlatform, withEnv, type TestPlatform } from './support/platform.js';
import { bucketName, login, md5Hex, s3ErrorOf, sdkClient } from './support/s3.js';
import { adminPurge } from '../support/admin-jobs.js';

const MiB = 1024 * 1024;
const DAY = 24 * 3600 * 1000;

/**
 * Buckets on an S3-compatible backend through the standalone platform: the `minio` backend points at
 * a real radosgw (s3rver where Ceph is missing), the `cloud` backend at a port nobody listens on.
 * The data plane reads its backend settings from env (STRATA_BACKEND_*), set here around the start.
 */
describe('e2e: storage backends per bucket (object-store server through the minio client)', function () {
  this.timeout(180_000);
  let rgw: S3ServerHarness;
  let backendClient: S3Client;
  let p: TestPlatform;
  let s3: S3Client;
  let token: string;
  const backendBucket = `strata-e2e-${randomUUID().slice(0, 8)}`;
  const bucket = bucketName('on-minio');
  const auth = () => ({ authorization: `Bearer ${token}` });
  let restoreEnv = () => {};

  /** Blob objects Strata keeps on the backend. */
  const backendKeys = async () => {
    const listed = await backendClient.send(new ListObjectsV2Command({ Bucket: backendBucket, Prefix: 'e2e/' }));
    return (listed.Contents ?? []).map((c) => c.Key!);
  };

  before(async () => {
    rgw = await sharedRgw();
    backendClient = s3ClientFor(rgw);
    const [deadPort] = await freePorts(1);
    restoreEnv = withEnv({
      STRATA_BACKEND_MINIO_ENDPOINT: rgw.endpoint,
      STRATA_BACKEND_MINIO_ACCESS_KEY: rgw.accessKey,
      STRATA_BACKEND_MINIO_SECRET_KEY: rgw.secretKey,
      STRATA_BACKEND_MINIO_BUCKET: backendBucket,
      STRATA_BACKEND_MINIO_PREFIX: 'e2e/',
      STRATA_BACKEND_CLOUD_ENDPOINT: `http://127.0.0.1:${deadPort}`,
      STRATA_BACKEND_CLOUD_ACCESS_KEY: 'unused',
      STRATA_BACKEND_CLOUD_SECRET_KEY: 'unused',
    });
    p = await startTestPlatform();
    token = await login(p.endpoint);
    s3 = sdkClient(p.endpoint);
  });
  after(async () => {
    restoreEnv();
    s3?.destroy();
    backendClient?.destroy();
    await p?.destroy();
  });

  it(`creates a bucket on the minio backend (header), its bytes land on ${process.env.STRATA_TEST_S3 === 's3rver' ? 's3rver' : 'radosgw'}`, async () => {
    const r = await fetch(`${p.endpoint}/${bucket}`, { method: 'PUT', headers: { ...auth(), 'x-strata-backend': 'minio' } });
    expect(r.status, await r.text()).to.equal(200);
    const body = randomBytes(300_000);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'a/b.bin', Body: body, ContentType: 'application/x-test' }));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'a/b.bin' }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).to.equal(true);
    expect(got.ETag).to.equal(`"${md5Hex(body)}"`);
    const range = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'a/b.bin', Range: 'bytes=1000-1999' }));
    expect(range.ContentRange).to.equal(`bytes 1000-1999/${body.length}`);
    expect(Buffer.from(await range.Body!.transformToByteArray()).equals(body.subarray(1000, 2000))).to.equal(true);
    const keys = await backendKeys();
    expect(keys).to.have.length(1);
    expect(keys[0]).to.match(/^e2e\/blobs\/[0-9a-f]{32}$/);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
    expect(listed.Contents?.map((c) => c.Key)).to.deep.equal(['a/b.bin']);
  });

  it('Bearer GET redirects (302) to a presigned URL of the backend itself; the bytes come from there; proxy=true streams through Strata', async () => {
    await s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'direct.txt',
        Body: 'served by the backend',
        ContentType: 'text/plain',
        CacheControl: 'max-age=77',
        ContentDisposition: 'inline; filename="d.txt"',
      }),
    );
    const r = await fetch(`${p.endpoint}/${bucket}/direct.txt`, { headers: auth(), redirect: 'manual' });
    expect(r.status).to.equal(302);
    const location = r.headers.get('location')!;
    expect(location.startsWith(`${rgw.endpoint}/${backendBucket}/e2e/blobs/`), location).to.equal(true);
    const direct = await fetch(location);
    expect(direct.status).to.equal(200);
    expect(direct.headers.get('content-type')).to.match(/^text\/plain/);
    // The object's stored headers come from the backend as well (response-* overrides in its URL).
    expect([direct.headers.get('cache-control'), direct.headers.get('content-disposition')]).to.deep.equal(['max-age=77', 'inline; filename="d.txt"']);
    expect(await direct.text()).to.equal('served by the backend');
    const proxied = await fetch(`${p.endpoint}/${bucket}/direct.txt?proxy=true`, { headers: auth(), redirect: 'manual' });
    expect(proxied.status).to.equal(200);
    expect(await proxied.text()).to.equal('served by the backend');
  });

  it('multipart upload composes on the backend; copy shares the blob; instant upload hits; objects read back whole', async () => {
    const parts = [randomBytes(5 * MiB), randomBytes(MiB + 5)];
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin' }));
    const etags = [];
    for (const [i, part] of parts.entries()) {
      const up = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'big.bin', UploadId, PartNumber: i + 1, Body: part }));
      etags.push({ PartNumber: i + 1, ETag: up.ETag });
    }
    const before = (await backendKeys()).length;
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin', UploadId, MultipartUpload: { Parts: etags } }));
    const whole = Buffer.concat(parts);
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'big.bin' }));
    expect(got.ETag).to.match(/-2"$/);
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(whole)).to.equal(true);
    // The two part objects are gone; one composed blob is left.
    expect((await backendKeys()).filter((k) => k.includes('/parts/'))).to.deep.equal([]);
    expect((await backendKeys()).length).to.equal(before - 2 + 1);

    const blobsBeforeCopy = (await backendKeys()).length;
    await s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'big-copy.bin', CopySource: `${bucket}/big.bin` }));
    const copy = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'big-copy.bin', Range: 'bytes=5242870-5242889' }));
    expect(Buffer.from(await copy.Body!.transformToByteArray()).equals(whole.subarray(5242870, 5242890))).to.equal(true);
    expect((await backendKeys()).length, 'a copy on the same backend shares the blob').to.equal(blobsBeforeCopy);

    // One part by its number: a range of the composed blob on the backend.
    const part2 = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'big.bin', PartNumber: 2 }));
    expect(part2.PartsCount).to.equal(2);
    expect(Buffer.from(await part2.Body!.transformToByteArray()).equals(parts[1]!)).to.equal(true);
    // A copy to a bucket on another backend (the filesystem) copies the bytes; a checksum asked for is computed on the way.
    const fsBucket = `${bucket}-fs`;
    await s3.send(new CreateBucketCommand({ Bucket: fsBucket }));
    const crossed = await s3.send(new CopyObjectCommand({ Bucket: fsBucket, Key: 'big.bin', CopySource: `${bucket}/big.bin`, ChecksumAlgorithm: 'SHA256' }));
    expect(crossed.CopyObjectResult?.ChecksumSHA256).to.equal(createHash('sha256').update(whole).digest('base64'));
    const crossedPart = await s3.send(new GetObjectCommand({ Bucket: fsBucket, Key: 'big.bin', PartNumber: 1 }));
    expect(crossedPart.PartsCount).to.equal(2);
    expect(Buffer.from(await crossedPart.Body!.transformToByteArray()).equals(parts[0]!)).to.equal(true);

    const content = randomBytes(70_000);
    const put = (key: string) =>
      fetch(`${p.endpoint}/${bucket}/${key}`, { method: 'PUT', headers: { ...auth(), 'x-service-md5': md5Hex(content) }, body: content });
    expect(((await (await put('instant/1.bin')).json()) as { data: { instant: boolean } }).data.instant).to.equal(false);
    expect(((await (await put('instant/2.bin')).json()) as { data: { instant: boolean } }).data.instant).to.equal(true);
    const second = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'instant/2.bin' }));
    expect(Buffer.from(await second.Body!.transformToByteArray()).equals(content)).to.equal(true);
  });

  it('delete + purge free a blob on the backend only when no object references it any more', async () => {
    const keysBefore = await backendKeys();
    const purge = async () => adminPurge(p.endpoint, auth(), { now: new Date(Date.now() + 31 * DAY).toISOString() });
    // big.bin and big-copy.bin share a blob: purging one keeps the bytes.
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'big.bin' }));
    expect((await purge()).freedBlobs).to.equal(0);
    expect(await backendKeys()).to.deep.equal(keysBefore);
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'big-copy.bin' }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'instant/1.bin' }));
    const second = await purge();
    expect(second.freedBlobs).to.equal(1); // the composed blob; instant/2.bin still holds the other
    expect((await backendKeys()).length).to.equal(keysBefore.length - 1);
    for (const key of ['a/b.bin', 'direct.txt', 'instant/2.bin']) await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    expect((await purge()).freedBlobs).to.equal(3);
    expect(await backendKeys()).to.deep.equal([]);
    const gone = await fetch(`${p.endpoint}/${bucket}`, { method: 'DELETE', headers: auth() });
    expect(gone.status).to.equal(204);
  });

  it('a JSON body picks the backend for Bearer clients; settings from clients are refused', async () => {
    const name = bucketName('json-minio');
    const r = await fetch(`${p.endpoint}/${name}`, {
      method: 'PUT',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ backend: { kind: 'minio' } }),
    });
    expect(r.status, await r.text()).to.equal(200);
    const listed = await fetch(`${p.endpoint}/${name}/x.txt`, { method: 'PUT', headers: auth(), body: 'x' });
    expect(listed.status).to.equal(200);
    expect((await backendKeys()).length).to.equal(1);
    const settings = await fetch(`${p.endpoint}/${bucketName('evil')}`, {
      method: 'PUT',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ backend: { kind: 'minio', endpoint: 'http://169.254.169.254' } }),
    });
    expect(settings.status).to.equal(400);
    expect(s3ErrorOf(await settings.text()).code).to.equal('InvalidArgument');
  });

  it('bad input: an unknown kind is 400, an unreachable backend 503; neither leaves a bucket behind', async () => {
    const unknown = bucketName('unknown');
    const r1 = await fetch(`${p.endpoint}/${unknown}`, { method: 'PUT', headers: { ...auth(), 'x-strata-backend': 'gcs' } });
    expect(r1.status).to.equal(400);
    const e1 = s3ErrorOf(await r1.text());
    expect(e1.code).to.equal('InvalidArgument');
    expect(e1.message).to.match(/Unknown backend (&quot;|")gcs(&quot;|"): use fs, minio or cloud/);

    const down = bucketName('down');
    const r2 = await fetch(`${p.endpoint}/${down}`, { method: 'PUT', headers: { ...auth(), 'x-strata-backend': 'cloud' } });
    expect(r2.status).to.equal(503);
    const e2 = s3ErrorOf(await r2.text());
    expect(e2.code).to.equal('ServiceUnavailable');
    expect(e2.message).to.match(/storage backend cloud:127\.0\.0\.1:\d+\/strata\/ is unavailable/);

    for (const name of [unknown, down]) {
      const head = await fetch(`${p.endpoint}/${name}`, { method: 'HEAD', headers: auth() });
      expect(head.status, name).to.equal(404);
    }
    const all = await (await fetch(`${p.endpoint}/`, { headers: auth() })).text();
    expect(all).not.to.contain(unknown);
    expect(all).not.to.contain(down);
    // The minio bucket made before still serves (the failed creations touched nothing else).
    const minioBucket = /<Name>(json-minio-[^<]+)<\/Name>/.exec(all)![1];
    expect((await s3.send(new HeadObjectCommand({ Bucket: minioBucket, Key: 'x.txt' }))).ContentLength).to.equal(1);
  });
});

describe('e2e: a storage backend that goes down after its bucket was made', function () {
  this.timeout(120_000);
  let server: S3ServerHarness;
  let p: TestPlatform;
  let s3: S3Client;
  let restoreEnv = () => {};

  before(async () => {
    server = await startS3rver('outage test: the server is stopped mid-test');
    restoreEnv = withEnv({
      STRATA_BACKEND_MINIO_ENDPOINT: server.endpoint,
      STRATA_BACKEND_MINIO_ACCESS_KEY: server.accessKey,
      STRATA_BACKEND_MINIO_SECRET_KEY: server.secretKey,
    });
    // A hair-trigger breaker: without the StorageBackend exemption two backend failures would open it.
    p = await startTestPlatform(undefined, {
      gatewayRules: 'breakers:\n  default: { timeout: 10000, errorThresholdPercentage: 1, resetTimeout: 60000, volumeThreshold: 1 }\n',
    });
    s3 = sdkClient(p.endpoint);
  });
  after(async () => {
    restoreEnv();
    s3?.destroy();
    await p?.destroy();
    await server?.stop();
  });

  it('answers 503 ServiceUnavailable for that bucket only; other buckets keep working (the breaker stays closed)', async () => {
    const onMinio = bucketName('outage-minio');
    const onFs = bucketName('outage-fs');
    const token = await login(p.endpoint);
    expect(
      (await fetch(`${p.endpoint}/${onMinio}`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'x-strata-backend': 'minio' } })).status,
    ).to.equal(200);
    await s3.send(new CreateBucketCommand({ Bucket: onFs }));
    for (const b of [onMinio, onFs]) await s3.send(new PutObjectCommand({ Bucket: b, Key: 'k', Body: 'bytes' }));
    await server.stop();

    for (let i = 0; i < 4; i++) {
      const err = await s3.send(new GetObjectCommand({ Bucket: onMinio, Key: 'k' })).then(
        () => undefined,
        (e: Error & { $metadata?: { httpStatusCode?: number } }) => e,
      );
      expect(err?.name).to.equal('ServiceUnavailable');
      expect(err?.$metadata?.httpStatusCode).to.equal(503);
      expect(err?.message).to.match(/storage backend minio:/);
      const put = await s3.send(new PutObjectCommand({ Bucket: onMinio, Key: `new-${i}`, Body: 'x' })).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(put?.name).to.equal('ServiceUnavailable');
    }
    const fsObject = await s3.send(new GetObjectCommand({ Bucket: onFs, Key: 'k' }));
    expect(await fsObject.Body!.transformToString()).to.equal('bytes');
    // Metadata of the unreachable bucket is still served; nothing half-written became visible.
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: onMinio }));
    expect(listed.Contents?.map((c) => c.Key)).to.deep.equal(['k']);
  });
});
