import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { backendsConfigFromEnv, settingsOfBucket } from '../../images/data-plane/src/backends/config.js';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { BackendRegistry } from '../../images/data-plane/src/backends/registry.js';
import { S3Backend, type S3BackendSettings } from '../../images/data-plane/src/backends/s3-backend.js';
import { SecretBox } from '../../images/service-kit/src/index.js';
import { S3Error } from '../../images/object-model/src/index.js';
import { freePorts } from '../support/ports.js';
import { ROOT, SERVER_SECRET_KEY, startObjectLayer, type ObjectLayer } from './harness.js';
import { s3ClientFor, sharedRgw, startS3rver, type S3ServerHarness } from '../support/rgw.js';
import { internalPurge } from '../support/admin-jobs.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const MiB = 1024 * 1024;

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A body delivered in small chunks, as a request would arrive. */
const bodyOf = (b: Buffer) =>
  Readable.from(
    (function* () {
      for (let i = 0; i < b.length; i += 64 * 1024) yield b.subarray(i, i + 64 * 1024);
    })(),
  );

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

const settingsFor = (h: S3ServerHarness, prefix: string): S3BackendSettings => ({
  kind: 'minio',
  endpoint: h.endpoint,
  region: 'us-east-1',
  accessKey: h.accessKey,
  secretKey: h.secretKey,
  bucket: `strata-backend-${randomUUID().slice(0, 8)}`,
  prefix,
  pathStyle: true,
  partSize: 5 * MiB,
});

/** Keys under the backend's prefix, and multipart uploads still open there: what a failed write must not leave. */
async function leftovers(client: S3Client, s: S3BackendSettings, h: S3ServerHarness): Promise<{ keys: string[]; uploads: number }> {
  const listed = await client.send(new ListObjectsV2Command({ Bucket: s.bucket, Prefix: s.prefix }));
  // s3rver cannot list multipart uploads.
  const uploads = h.kind === 'radosgw' ? ((await client.send(new ListMultipartUploadsCommand({ Bucket: s.bucket, Prefix: s.prefix }))).Uploads ?? []) : [];
  return { keys: (listed.Contents ?? []).map((c) => c.Key!), uploads: uploads.length };
}

describe('data plane: S3-compatible storage backend (minio client)', function () {
  this.timeout(180_000);
  let server: S3ServerHarness;
  let client: S3Client;
  let settings: S3BackendSettings;
  let backend: S3Backend;

  before(async () => {
    // A real radosgw where Ceph is installed (s3rver otherwise; see test/support/rgw.ts).
    server = await sharedRgw();
    client = s3ClientFor(server);
    settings = settingsFor(server, 'unit/');
    backend = new S3Backend(settings);
  });
  after(() => client?.destroy());

  it(`runs against ${process.env.STRATA_TEST_S3 === 's3rver' ? 's3rver' : 'radosgw (s3rver where Ceph is missing)'}`, () => {
    expect(server.kind).to.be.oneOf(['radosgw', 's3rver']);
    if (server.kind === 's3rver') console.log(`      (s3rver: ${server.fallbackReason})`);
  });

  it('creates its bucket on first use, stores, reads, ranges and deletes a blob', async () => {
    await backend.ready();
    const body = randomBytes(100_000);
    const stored = await backend.put(bodyOf(body), { expectedSize: body.length, expectedMd5: md5(body) });
    expect(stored).to.include({ size: body.length, md5: md5(body) });
    expect(stored.locator).to.match(/^[0-9a-f]{32}$/);
    expect((await bytesOf(await backend.get(stored.locator))).equals(body)).to.equal(true);
    expect((await bytesOf(await backend.get(stored.locator, { start: 10, end: 19 }))).equals(body.subarray(10, 20))).to.equal(true);
    expect(await backend.exists(stored.locator)).to.equal(true);
    await backend.delete(stored.locator);
    expect(await backend.exists(stored.locator)).to.equal(false);
    await backend.delete(stored.locator); // missing: not an error
    // A missing blob read: BlobMissingError (answered 503 and logged as data loss), whole or ranged.
    for (const range of [undefined, { start: 10, end: 19 }]) expect((await rejection(backend.get(stored.locator, range))).name).to.equal('BlobMissingError');
  });

  it('streams a body larger than a part as a backend multipart upload, hashing it on the way', async () => {
    const body = randomBytes(12 * MiB + 123);
    const stored = await backend.put(bodyOf(body), { expectedSize: body.length });
    expect(stored).to.include({ size: body.length, md5: md5(body) });
    const head = await client.send(new HeadObjectCommand({ Bucket: settings.bucket, Key: `unit/blobs/${stored.locator}` }));
    expect(head.ContentLength).to.equal(body.length);
    if (server.kind === 'radosgw') expect(head.ETag).to.match(/-3"$/); // 5 + 5 + 2 MiB parts (s3rver's ETag does not say)
    await backend.delete(stored.locator);
  });

  it('leaves nothing on the backend when the body fails its checks (BadDigest, too long, too short, too large)', async () => {
    const small = randomBytes(1000);
    const big = randomBytes(11 * MiB);
    const cases: Array<[Buffer, Parameters<S3Backend['put']>[1], string]> = [
      [small, { expectedMd5: md5(Buffer.from('other')) }, 'BadDigest'],
      [big, { expectedMd5: md5(Buffer.from('other')), expectedSize: big.length }, 'BadDigest'],
      [small, { expectedSize: 999 }, 'InvalidRequest'],
      [small, { expectedSize: 1001 }, 'IncompleteBody'],
      [big, { maxSize: 6 * MiB }, 'EntityTooLarge'],
    ];
    for (const [body, opts, code] of cases) {
      const err = await rejection(backend.put(bodyOf(body), opts));
      expect(err).to.be.instanceOf(S3Error);
      expect((err as S3Error).code).to.equal(code);
    }
    expect(await leftovers(client, settings, server)).to.deep.equal({ keys: [], uploads: 0 });
  });

  it('composes multipart parts on the backend itself (UploadPartCopy): no bytes through Strata, MD5 unknown', async function () {
    if (server.kind !== 'radosgw') this.skip(); // s3rver has no UploadPartCopy (see the fallback test)
    const a = randomBytes(5 * MiB);
    const b = randomBytes(MiB + 7);
    const parts = [await backend.put(bodyOf(a), { part: true }), await backend.put(bodyOf(b), { part: true })];
    expect(parts.every((p) => p.locator.startsWith('p'))).to.equal(true);
    const composed = await backend.compose(parts.map((p) => p.locator));
    expect(composed).to.include({ size: a.length + b.length, md5: null });
    // A server-side multipart copy of two parts: the backend's ETag says 2 parts (a streamed copy would be one PUT).
    const head = await client.send(new HeadObjectCommand({ Bucket: settings.bucket, Key: `unit/blobs/${composed.locator}` }));
    expect(head.ETag).to.match(/-2"$/);
    expect((await bytesOf(await backend.get(composed.locator))).equals(Buffer.concat([a, b]))).to.equal(true);
    for (const l of [...parts.map((p) => p.locator), composed.locator]) await backend.delete(l);
    expect(await leftovers(client, settings, server)).to.deep.equal({ keys: [], uploads: 0 });
  });

  it('serves a blob through a presigned URL of the backend, typed as asked', async () => {
    const body = Buffer.from(`direct ${randomUUID()}`);
    const stored = await backend.put(bodyOf(body));
    const url = await backend.directUrl(stored.locator, 60, { contentType: 'text/plain' });
    expect(url.startsWith(`${server.endpoint}/${settings.bucket}/unit/blobs/${stored.locator}?`)).to.equal(true);
    const res = await fetch(url);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/plain/);
    expect(Buffer.from(await res.arrayBuffer()).equals(body)).to.equal(true);
    await backend.delete(stored.locator);
  });

  it('lists its blobs, sweeps stale parts and aborts its own stale backend uploads for the cleanup job', async () => {
    const blob = await backend.put(bodyOf(randomBytes(10)));
    const part = await backend.put(bodyOf(randomBytes(10)), { part: true });
    const listed = [];
    for await (const b of backend.listBlobs()) listed.push(b.locator);
    expect(listed).to.include(blob.locator).and.not.include(part.locator);
    expect(await backend.removeStaleParts(3_600_000)).to.equal(0);
    expect(await backend.exists(part.locator)).to.equal(true);
    expect(await backend.removeStaleParts(-60_000)).to.equal(1);
    expect(await backend.exists(part.locator)).to.equal(false);
    await backend.delete(blob.locator);
    if (server.kind !== 'radosgw') return; // s3rver cannot list multipart uploads
    // A body that was streaming when its data plane died: a backend multipart upload never completed.
    // Only uploads under Strata's own names are aborted; others' uploads in the bucket are left alone.
    const mine = await client.send(new CreateMultipartUploadCommand({ Bucket: settings.bucket, Key: `unit/blobs/${'a'.repeat(32)}` }));
    const theirs = await client.send(new CreateMultipartUploadCommand({ Bucket: settings.bucket, Key: 'unit/other-app/file' }));
    expect(await backend.removeStaleTempFiles(3_600_000)).to.equal(0);
    expect(await backend.removeStaleTempFiles(-60_000)).to.equal(1);
    const open = await client.send(new ListMultipartUploadsCommand({ Bucket: settings.bucket }));
    expect(open.Uploads?.map((u) => u.UploadId)).to.deep.equal([theirs.UploadId]);
    expect(mine.UploadId).to.be.a('string');
    await client.send(new AbortMultipartUploadCommand({ Bucket: settings.bucket, Key: 'unit/other-app/file', UploadId: theirs.UploadId }));
  });

  it('answers 503 ServiceUnavailable when the backend cannot be reached', async () => {
    const [port] = await freePorts(1);
    const down = new S3Backend({ ...settings, endpoint: `http://127.0.0.1:${port}` });
    for (const attempt of [down.ready(), down.put(bodyOf(Buffer.from('x'))), down.get('0'.repeat(32))]) {
      const err = await rejection(attempt);
      expect(err).to.be.instanceOf(S3Error);
      expect((err as S3Error).code).to.equal('ServiceUnavailable');
      expect((err as S3Error).status).to.equal(503);
      expect(err.message).to.include(`127.0.0.1:${port}`);
    }
  });

  it('answers 503 ServiceUnavailable naming the cause when the backend refuses the credentials', async function () {
    if (server.kind !== 'radosgw') this.skip(); // s3rver does not check every signature
    const wrong = new S3Backend({ ...settings, secretKey: 'not-the-secret' });
    const err = await rejection(wrong.ready());
    expect((err as S3Error).code).to.equal('ServiceUnavailable');
    expect(err.message).to.match(/SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied/);
  });

  it('answers 503 SlowDown (never 500) when the backend itself asks to slow down, for every call', async () => {
    const overloaded = http.createServer((req, res) => {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/xml' }).end('<Error><Code>SlowDown</Code><Message>slow down</Message></Error>');
    });
    await new Promise<void>((resolve) => overloaded.listen(0, '127.0.0.1', resolve));
    try {
      const busy = new S3Backend({ ...settings, endpoint: `http://127.0.0.1:${(overloaded.address() as AddressInfo).port}` });
      for (const attempt of [busy.ready(), busy.put(bodyOf(Buffer.from('x'))), busy.get('0'.repeat(32)), busy.exists('0'.repeat(32))]) {
        const err = await rejection(attempt);
        expect(err).to.be.instanceOf(S3Error);
        expect({ code: (err as S3Error).code, status: (err as S3Error).status }).to.deep.equal({ code: 'SlowDown', status: 503 });
      }
    } finally {
      overloaded.close();
    }
  });

  it('answers 503 ServiceUnavailable when the backend accepts connections but never answers', async () => {
    const sockets: Socket[] = [];
    const silent = net.createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const hung = new S3Backend({ ...settings, endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, idleTimeoutMs: 300 });
      const err = await rejection(hung.ready());
      expect((err as S3Error).code).to.equal('ServiceUnavailable');
      expect(err.message).to.include('ETIMEDOUT');
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  it('falls back to a streamed compose on servers without UploadPartCopy (s3rver), hashing the result', async () => {
    const s3rver = await startS3rver('compose fallback test');
    try {
      const b2 = new S3Backend(settingsFor(s3rver, ''));
      const a = randomBytes(5 * MiB);
      const b = randomBytes(100);
      const parts = [await b2.put(bodyOf(a), { part: true }), await b2.put(bodyOf(b), { part: true })];
      const composed = await b2.compose(parts.map((p) => p.locator));
      expect(composed).to.include({ size: a.length + b.length, md5: md5(Buffer.concat([a, b])) });
      expect((await bytesOf(await b2.get(composed.locator))).equals(Buffer.concat([a, b]))).to.equal(true);
    } finally {
      await s3rver.stop();
    }
  });
});

describe('data plane: backend registry and configuration', () => {
  let dir: string;
  let fs: FsBackend;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'strata-backends-'));
    fs = new FsBackend(dir);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('reads STRATA_BACKEND_MINIO_* and STRATA_BACKEND_CLOUD_* (cloud: AWS endpoint of the region, virtual-hosted)', () => {
    const config = backendsConfigFromEnv({
      STRATA_BACKEND_MINIO_ENDPOINT: 'http://minio:9000',
      STRATA_BACKEND_MINIO_ACCESS_KEY: 'ak',
      STRATA_BACKEND_MINIO_SECRET_KEY: 'sk',
      STRATA_BACKEND_CLOUD_REGION: 'eu-west-1',
      STRATA_BACKEND_CLOUD_ACCESS_KEY: 'cak',
      STRATA_BACKEND_CLOUD_SECRET_KEY: 'csk',
      STRATA_BACKEND_CLOUD_BUCKET: 'my-bucket',
      STRATA_BACKEND_CLOUD_PREFIX: 'strata/',
    });
    expect(config.minio).to.deep.include({ kind: 'minio', endpoint: 'http://minio:9000', region: 'us-east-1', bucket: 'strata', pathStyle: true });
    expect(config.cloud).to.deep.include({
      kind: 'cloud',
      endpoint: 'https://s3.eu-west-1.amazonaws.com',
      region: 'eu-west-1',
      bucket: 'my-bucket',
      prefix: 'strata/',
      pathStyle: false,
    });
    expect(backendsConfigFromEnv({})).to.deep.equal({});
    expect(() => backendsConfigFromEnv({ STRATA_BACKEND_MINIO_ENDPOINT: 'http://minio:9000' })).to.throw(/ACCESS_KEY and _SECRET_KEY are required/);
  });

  it('picks fs, the configured kind, or the settings a bucket carries; refuses unknown and unconfigured kinds with 400', async () => {
    const minio = {
      kind: 'minio' as const,
      endpoint: 'http://127.0.0.1:1',
      region: 'us-east-1',
      accessKey: 'a',
      secretKey: 'b',
      bucket: 'strata',
      pathStyle: true,
    };
    const registry = new BackendRegistry(fs, { minio });
    expect(registry.forBucket({ kind: 'fs' })).to.equal(fs);
    const configured = registry.forBucket({ kind: 'minio' });
    expect(configured.key).to.equal('minio:127.0.0.1:1/strata/');
    expect(registry.byBackendKey(configured.key)).to.equal(configured);
    for (const kind of ['cloud', 'gcs']) {
      const err = (() => {
        try {
          registry.forBucket({ kind });
        } catch (e) {
          return e as S3Error;
        }
        throw new Error('expected an error');
      })();
      expect(err.code).to.equal('InvalidArgument');
      expect(err.status).to.equal(400);
    }
    // An operator-made bucket carries its own endpoint and credentials (endpoint without scheme: useSSL decides).
    const own = { kind: 'cloud', endpoint: 'storage.example.com', region: 'eu-west-1', bucket: 'b1', accessKey: 'x', secretKey: 'y', useSSL: true };
    expect(settingsOfBucket(own)).to.deep.include({ endpoint: 'https://storage.example.com', pathStyle: false });
    const perBucket = registry.forBucket(own);
    expect(perBucket.key).to.equal('cloud:storage.example.com/b1/');
    expect(registry.forBucket(own)).to.equal(perBucket);
    expect(registry.sweepable.map((b) => b.key)).to.deep.equal(['fs', configured.key, perBucket.key]);
    // A bucket's own backend that does not answer is not kept (nothing of it left to sweep).
    const unreachable = { ...own, endpoint: 'http://127.0.0.1:1', bucket: 'bucket-nine', pathStyle: true };
    const failed = await rejection(registry.check(unreachable));
    expect((failed as S3Error).code).to.equal('ServiceUnavailable');
    expect(registry.sweepable).to.have.length(3);
    const badName = await rejection(registry.check({ ...unreachable, bucket: 'b9' }));
    expect((badName as S3Error).code).to.equal('InvalidArgument');
    expect(badName.message).to.match(/settings are not valid: Invalid bucket name: b9/);
    expect(registry.sweepable).to.have.length(3);
    expect(registry.forBlob(perBucket.key, undefined)).to.equal(perBucket);
    // After a restart the registry knows only configured backends: a blob's stored config rebuilds its own.
    const restarted = new BackendRegistry(fs, { minio });
    expect(restarted.byBackendKey(perBucket.key)).to.equal(undefined);
    expect(restarted.forBlob(perBucket.key, own)?.key).to.equal(perBucket.key);
    expect(restarted.forBlob('cloud:elsewhere/b2/', own)).to.equal(undefined);
    expect(() => registry.forBucket({ kind: 'minio', endpoint: 'http://x' })).to.throw(/need accessKey, secretKey and bucket/);
    // A sealed secret key opens only with the server key the control plane sealed it with.
    const sealedSettings = { ...own, secretKey: undefined, secretKeySealed: new SecretBox('the-server-secret-key').seal('y') };
    expect(settingsOfBucket(sealedSettings, new SecretBox('the-server-secret-key'))).to.include({ secretKey: 'y', accessKey: 'x' });
    expect(() => settingsOfBucket(sealedSettings)).to.throw(S3Error, /no STRATA_SECRET_KEY/);
    expect(() => settingsOfBucket(sealedSettings, new SecretBox('another-server-key'))).to.throw(S3Error, /does not open/);
  });
});

describe('object layer: bucket creation checks the backend first (the operator path: settings carried by the bucket)', function () {
  this.timeout(120_000);
  let layer: ObjectLayer;
  let server: S3ServerHarness;
  let client: S3Client;
  let own: Record<string, unknown>;

  before(async () => {
    server = await sharedRgw();
    client = s3ClientFor(server);
    layer = await startObjectLayer('pglite');
    own = {
      kind: 'minio',
      endpoint: server.endpoint.replace(/^http:\/\//, ''),
      useSSL: false,
      region: 'us-east-1',
      bucket: `strata-op-${randomUUID().slice(0, 8)}`,
      prefix: 'op/',
      accessKey: server.accessKey,
      secretKey: server.secretKey,
    };
  });
  after(async () => {
    client?.destroy();
    await layer?.stop();
  });

  const create = (name: string, backend: Record<string, unknown>) => layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: ROOT.user, backend });
  const errorOf = async (r: Response) => ((await r.json()) as { error: { code: string; message: string } }).error;

  it('creates the bucket on its own backend; bytes land there and are freed there by purge', async () => {
    const r = await create('op-bucket', own);
    expect(r.status, await r.clone().text()).to.equal(200);
    // Its credentials are never answered back.
    const answered = (await (await layer.cpFetch('GET', '/internal/buckets/op-bucket')).json()) as { backend: Record<string, unknown> };
    expect(answered.backend).to.include({ kind: 'minio', bucket: own.bucket }).and.not.have.any.keys('accessKey', 'secretKey');
    expect(JSON.stringify(await r.json())).not.to.contain(server.secretKey);
    const body = randomBytes(5000);
    const put = await layer.dpFetch('PUT', '/internal/objects/op-bucket/k', body, { 'content-length': String(body.length) });
    expect(put.status).to.equal(200);
    // At rest the secret key is only sealed with the server key: in the bucket row and the blob's copy.
    const stored = await layer.sql.query<{ backend: Record<string, unknown> }>(
      "SELECT backend FROM buckets WHERE name = 'op-bucket' UNION ALL SELECT b.backend FROM blobs b WHERE b.backend->>'bucket' = $1",
      [own.bucket],
    );
    expect(stored.rows).to.have.length(2);
    for (const row of stored.rows) {
      expect(JSON.stringify(row.backend)).not.to.contain(server.secretKey);
      expect(row.backend).to.not.have.property('secretKey');
      expect(new SecretBox(SERVER_SECRET_KEY).open(row.backend.secretKeySealed as string)).to.equal(server.secretKey);
    }
    const got = await layer.dpFetch('GET', '/internal/objects/op-bucket/k');
    expect(Buffer.from(await got.arrayBuffer()).equals(body)).to.equal(true);
    const keys = async () => ((await client.send(new ListObjectsV2Command({ Bucket: own.bucket as string, Prefix: 'op/' }))).Contents ?? []).map((c) => c.Key);
    expect(await keys()).to.have.length(1);
    expect((await layer.cpFetch('DELETE', '/internal/buckets/op-bucket/objects/k')).status).to.equal(204);
    const purge = await internalPurge(layer.cpFetch, { now: new Date(layer.clock.now.getTime() + 31 * 24 * 3600 * 1000).toISOString() });
    expect(purge.freedBlobs).to.equal(1);
    expect(await keys()).to.deep.equal([]);
  });

  it('refuses incomplete settings and unconfigured kinds (400) and unreachable backends (503), creating nothing', async () => {
    const [port] = await freePorts(1);
    const cases: Array<[string, Record<string, unknown>, number, string, RegExp]> = [
      ['op-incomplete', { kind: 'minio', endpoint: 'http://127.0.0.1:1' }, 400, 'InvalidArgument', /need accessKey, secretKey and bucket/],
      ['op-unconfigured', { kind: 'cloud' }, 400, 'InvalidArgument', /cloud storage backend is not configured/],
      ['op-unreachable', { ...own, endpoint: `127.0.0.1:${port}` }, 503, 'ServiceUnavailable', /unavailable/],
    ];
    for (const [name, backend, status, code, message] of cases) {
      const r = await create(name, backend);
      expect(r.status, name).to.equal(status);
      const err = await errorOf(r);
      expect(err.code, name).to.equal(code);
      expect(err.message, name).to.match(message);
      expect((await layer.cpFetch('GET', `/internal/buckets/${name}`)).status, name).to.equal(404);
    }
  });
});
