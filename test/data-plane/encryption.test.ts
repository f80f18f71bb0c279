import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { readdir, readFile, readlink, unlink } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { BuiltInKeyStore, keyFingerprint, type KeyStore } from '../../images/data-plane/src/encryption/key-store.js';
import { ThreadMd5 } from '../../images/data-plane/src/backends/md5-thread.js';
import { CHUNK } from '../../images/data-plane/src/encryption/chunked-aead.js';
import { eventually } from '../support/eventually.js';
import { enc, startObjectLayer, TOKEN, type ObjectLayer } from './harness.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const masterStore = (current: Buffer, ...old: Buffer[]) =>
  new BuiltInKeyStore(new Map([...old, current].map((k) => [keyFingerprint(k), k])), keyFingerprint(current), 'sse-s3');

describe('data plane: server-side encryption at rest', function () {
  this.timeout(60_000);
  let layer: ObjectLayer;
  const firstKek = randomBytes(32);
  const keys: { master?: KeyStore; kms?: KeyStore } = {
    master: masterStore(firstKek),
    kms: new BuiltInKeyStore(new Map([['app-key', randomBytes(32)]]), 'app-key', 'sse-kms'),
  };
  const customerKey = randomBytes(32).toString('base64');
  let bucket: string;

  before(async () => {
    layer = await startObjectLayer('postgres', { inlineBlobBytes: 0, keyStores: keys });
    bucket = `sse-${randomBytes(3).toString('hex')}`;
    expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
  });
  after(async () => {
    await layer?.stop();
  });

  const sseHeader = (sse: object) => ({ 'x-strata-sse': JSON.stringify(sse) });
  const put = (key: string, body: Buffer, headers: Record<string, string> = {}) =>
    layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key)}`, body as unknown as BodyInit, {
      'x-strata-owner': 'alice',
      'content-length': String(body.length),
      ...headers,
    });
  const get = (key: string, headers: Record<string, string> = {}) => layer.dpFetch('GET', `/internal/objects/${bucket}/${enc(key)}`, undefined, headers);
  /** What `run` answers, and how many bytes the MD5 thread was given meanwhile. */
  const hashedDuring = async <T>(run: () => Promise<T>): Promise<[T, number]> => {
    let hashed = 0;
    const update = ThreadMd5.prototype.update;
    ThreadMd5.prototype.update = function (this: ThreadMd5, bytes: Uint8Array) {
      hashed += bytes.length;
      return update.call(this, bytes);
    };
    try {
      return [await run(), hashed];
    } finally {
      ThreadMd5.prototype.update = update;
    }
  };
  const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });
  /** The bytes of every stored blob file. */
  const storedFiles = async () => Promise.all((await layer.files()).filter((f) => f.startsWith('blobs/')).map((f) => readFile(path.join(layer.dataDir, f))));
  const locatorOf = async (key: string) =>
    (
      await layer.sql.query<{ locator: string }>(
        `SELECT b.locator FROM object_info o JOIN blobs b ON b.id = o.blob_id JOIN buckets k ON k.id = o.bucket_id WHERE k.name = $1 AND o.key = $2 AND o.state = 'NORMAL'`,
        [bucket, key],
      )
    ).rows[0]!.locator;

  it('SSE-S3: round trip, the MD5 ETag of the plaintext, the answer headers; the bytes on disk are not the plaintext', async () => {
    const body = randomBytes(3 * CHUNK + 1234);
    const res = await put('s3.bin', body, sseHeader({ method: 'AES256' }));
    expect(res.status).to.equal(200);
    const answer = (await res.json()) as { object: { etag: string; size: number; sse: unknown; headers?: Record<string, string> } };
    expect(answer.object).to.include({ etag: md5(body), size: body.length });
    expect(answer.object.sse).to.deep.equal({ algorithm: 'AES256' });
    expect(answer.object.headers, 'the encryption record never leaves the data plane').to.equal(undefined);
    const read = await get('s3.bin');
    expect(read.headers.get('x-strata-sse-answer')).to.equal(JSON.stringify({ algorithm: 'AES256' }));
    expect(read.headers.get('x-strata-headers')).to.equal(null);
    expect(Buffer.from(await read.arrayBuffer()).equals(body)).to.equal(true);
    const files = await storedFiles();
    expect(files.length).to.be.greaterThan(0);
    for (const f of files) expect(f.includes(body.subarray(0, 64)), 'plaintext on disk').to.equal(false);
  });

  it('range reads across chunk borders decrypt exactly the bytes asked for', async () => {
    const body = randomBytes(4 * CHUNK + 77);
    expect((await put('ranges.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    const cases: Array<[number, number]> = [
      [0, 0],
      [CHUNK - 1, CHUNK],
      [CHUNK - 10, 3 * CHUNK + 5],
      [2 * CHUNK, 2 * CHUNK + CHUNK - 1],
      [4 * CHUNK, 4 * CHUNK + 76],
      [123, 4 * CHUNK + 76],
    ];
    for (const [start, end] of cases) {
      const res = await get('ranges.bin', { range: `bytes=${start}-${end}` });
      expect(res.status, `${start}-${end}`).to.equal(206);
      expect(res.headers.get('content-range')).to.equal(`bytes ${start}-${end}/${body.length}`);
      expect(Buffer.from(await res.arrayBuffer()).equals(body.subarray(start, end + 1)), `${start}-${end}`).to.equal(true);
    }
    const suffix = await get('ranges.bin', { range: 'bytes=-100' });
    expect(Buffer.from(await suffix.arrayBuffer()).equals(body.subarray(body.length - 100))).to.equal(true);
  });

  it('a tampered chunk on disk fails the read: no wrong bytes are served', async () => {
    const body = randomBytes(2 * CHUNK + 10);
    expect((await put('tamper.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    const locator = await locatorOf('tamper.bin');
    const file = (await layer.files()).find((f) => f.endsWith(locator))!;
    const full = path.join(layer.dataDir, file);
    const bytes = await readFile(full);
    bytes[8 + CHUNK + 16 + 5] ^= 0xff; // a byte of chunk 1
    const { chmod, writeFile } = await import('node:fs/promises');
    await chmod(full, 0o600).catch(() => undefined);
    await writeFile(full, bytes);
    // Chunk 0 alone is intact and still served; anything that covers chunk 1 fails.
    const head = await get('tamper.bin', { range: `bytes=0-${CHUNK - 1}` });
    expect(Buffer.from(await head.arrayBuffer()).equals(body.subarray(0, CHUNK))).to.equal(true);
    const received: Buffer[] = [];
    let failed = false;
    try {
      const res = await get('tamper.bin', { range: `bytes=${CHUNK}-${CHUNK + 100}` });
      for await (const c of res.body!) received.push(Buffer.from(c));
    } catch {
      failed = true;
    }
    expect(failed, 'the read must fail').to.equal(true);
    expect(Buffer.concat(received).length).to.equal(0);
  });

  it('SSE-C: the key is needed on every read (400 without, 403 with another), never stored; the ETag is not the MD5', async () => {
    const body = randomBytes(CHUNK + 3);
    const res = await put('c.bin', body, sseHeader({ customerKey }));
    expect(res.status).to.equal(200);
    const meta = ((await res.json()) as { object: { etag: string; sse: unknown } }).object;
    const keyMd5 = createHash('md5').update(Buffer.from(customerKey, 'base64')).digest('base64');
    expect(meta.sse).to.deep.equal({ customerKeyMd5: keyMd5 });
    expect(meta.etag).to.not.equal(md5(body));
    expect(await errorOf(await get('c.bin'))).to.deep.equal({ status: 400, code: 'InvalidRequest' });
    expect((await layer.dpFetch('HEAD', `/internal/objects/${bucket}/c.bin`)).status, 'HEAD without the key').to.equal(400);
    expect(await errorOf(await get('c.bin', sseHeader({ customerKey: randomBytes(32).toString('base64') })))).to.deep.equal({
      status: 403,
      code: 'AccessDenied',
    });
    const ok = await get('c.bin', sseHeader({ customerKey }));
    expect(Buffer.from(await ok.arrayBuffer()).equals(body)).to.equal(true);
    const rows = await layer.sql.query<{ headers: unknown }>(`SELECT headers FROM object_info WHERE key = 'c.bin'`);
    expect(JSON.stringify(rows.rows), 'the customer key is not stored').to.not.include(customerKey);
    // A customer key for an object without SSE-C is InvalidRequest, as S3.
    expect(await errorOf(await get('s3.bin', sseHeader({ customerKey })))).to.deep.equal({ status: 400, code: 'InvalidRequest' });
  });

  it('SSE-KMS: a named key; an unknown key id is KMS.NotFoundException and stores nothing', async () => {
    const body = randomBytes(1000);
    const res = await put('kms.bin', body, sseHeader({ method: 'aws:kms', kmsKeyId: 'app-key' }));
    expect(res.status).to.equal(200);
    expect(((await res.json()) as { object: { sse: unknown } }).object.sse).to.deep.equal({ algorithm: 'aws:kms', kmsKeyId: 'app-key' });
    expect(Buffer.from(await (await get('kms.bin')).arrayBuffer()).equals(body)).to.equal(true);
    expect(await errorOf(await put('kms-bad.bin', body, sseHeader({ method: 'aws:kms', kmsKeyId: 'nope' })))).to.deep.equal({
      status: 400,
      code: 'KMS.NotFoundException',
    });
    expect((await get('kms-bad.bin')).status).to.equal(404);
  });

  it('a bad Content-MD5 of an encrypted body is BadDigest and stores nothing', async () => {
    const body = randomBytes(5000);
    const wrong = createHash('md5').update('other').digest('base64');
    expect(await errorOf(await put('digest.bin', body, { ...sseHeader({ method: 'AES256' }), 'x-strata-content-md5': wrong }))).to.deep.equal({
      status: 400,
      code: 'BadDigest',
    });
    expect((await get('digest.bin')).status).to.equal(404);
  });

  it('a large encrypted PUT hashes its plaintext only (the stored bytes keep no MD5), checks it, and reads back', async () => {
    const body = randomBytes(3 * 1048576 + 4321);
    const [res, hashed] = await hashedDuring(() =>
      put('large-sealed.bin', body, { ...sseHeader({ method: 'AES256' }), 'x-strata-content-md5': createHash('md5').update(body).digest('base64') }),
    );
    expect(res.status).to.equal(200);
    expect(((await res.json()) as { object: { etag: string } }).object.etag).to.equal(md5(body));
    expect(hashed, 'bytes hashed on the MD5 thread').to.equal(body.length);
    expect(md5(Buffer.from(await (await get('large-sealed.bin')).arrayBuffer()))).to.equal(md5(body));
    const wrong = createHash('md5').update('other').digest('base64');
    expect(await errorOf(await put('large-digest.bin', body, { ...sseHeader({ method: 'AES256' }), 'x-strata-content-md5': wrong }))).to.deep.equal({
      status: 400,
      code: 'BadDigest',
    });
    expect((await get('large-digest.bin')).status).to.equal(404);
  });

  it('a client that goes away mid-way through a large encrypted PUT leaves no file and no object; the next PUT works', async () => {
    const temp = async () => (await layer.files()).filter((f) => f.endsWith('.tmp'));
    const before = (await layer.files()).filter((f) => f.startsWith('blobs/')).sort();
    let streaming = false;
    await new Promise<void>((resolve) => {
      const req = http.request(new URL(`${layer.dp.url}/internal/objects/${bucket}/cut.bin`), {
        method: 'PUT',
        headers: { 'x-strata-internal-token': TOKEN, 'x-strata-owner': 'alice', 'content-length': String(8 * 1048576), ...sseHeader({ method: 'AES256' }) },
      });
      req.on('error', () => resolve());
      req.write(randomBytes(3 * 1048576));
      // Cut only once the bytes are really streaming into a temp file.
      const cut = () => {
        req.destroy();
        resolve();
      };
      eventually(async () => expect(await temp()).to.have.length(1)).then(() => {
        streaming = true;
        cut();
      }, cut);
    });
    expect(streaming, 'the upload had started streaming').to.equal(true);
    await eventually(async () => {
      expect(await temp()).to.deep.equal([]);
      expect((await layer.files()).filter((f) => f.startsWith('blobs/')).sort()).to.deep.equal(before);
    });
    expect((await get('cut.bin')).status).to.equal(404);
    const body = randomBytes(2 * 1048576 + 5);
    expect((await put('cut.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    expect(md5(Buffer.from(await (await get('cut.bin')).arrayBuffer()))).to.equal(md5(body));
  });

  it('an encrypted object whose stored bytes are missing answers 503 ServiceUnavailable, as a plain one does', async () => {
    const body = randomBytes(2 * 1048576);
    expect((await put('lost.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    const locator = await locatorOf('lost.bin');
    const file = (await layer.files()).find((f) => f.endsWith(locator))!;
    await unlink(path.join(layer.dataDir, file));
    expect(await errorOf(await get('lost.bin'))).to.deep.equal({ status: 503, code: 'ServiceUnavailable' });
  });

  it('a client that goes away mid-way through a large encrypted GET releases the blob file', async () => {
    const body = randomBytes(12 * 1048576);
    expect((await put('left.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    const locator = await locatorOf('left.bin');
    const blob = path.join(layer.dataDir, (await layer.files()).find((f) => f.endsWith(locator))!);
    /** Descriptors of this process open on the blob's file. */
    const openOnBlob = async () =>
      (await Promise.all((await readdir('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')))).filter((p) => p === blob);
    let req: http.ClientRequest | undefined;
    const first = await new Promise<Buffer>((resolve, reject) => {
      req = http.get(new URL(`${layer.dp.url}/internal/objects/${bucket}/left.bin`), { headers: { 'x-strata-internal-token': TOKEN } }, (res) => {
        res.once('data', (c: Buffer) => {
          res.pause();
          resolve(c);
        });
      });
      req.on('error', reject);
    });
    expect(await openOnBlob(), 'the blob is open while it is read').to.have.length(1);
    req!.destroy();
    expect(first.equals(body.subarray(0, first.length))).to.equal(true);
    // Closed by the read's end, not by the garbage collector (which warns when it closes a forgotten file).
    const collected: string[] = [];
    const onWarning = (w: Error) => void (/garbage collection/.test(w.message) && collected.push(w.message));
    process.on('warning', onWarning);
    try {
      await eventually(async () => expect(await openOnBlob()).to.deep.equal([]));
    } finally {
      process.off('warning', onWarning);
    }
    expect(collected).to.deep.equal([]);
    expect(md5(Buffer.from(await (await get('left.bin')).arrayBuffer()))).to.equal(md5(body));
  });

  it('KEK rotation: an object written under the old key-encryption key still reads; new objects use the new one', async () => {
    const body = randomBytes(10_000);
    expect((await put('rotated.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    const newKek = randomBytes(32);
    keys.master = masterStore(newKek, firstKek);
    expect(Buffer.from(await (await get('rotated.bin')).arrayBuffer()).equals(body)).to.equal(true);
    expect((await put('after.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    const records = await layer.sql.query<{ key: string; record: string }>(
      `SELECT key, headers->>'x-strata-encryption' AS record FROM object_info WHERE key IN ('rotated.bin', 'after.bin') AND state = 'NORMAL'`,
    );
    const kekOf = Object.fromEntries(records.rows.map((r) => [r.key, (JSON.parse(r.record) as { kek: string }).kek]));
    expect(kekOf).to.deep.equal({ 'rotated.bin': keyFingerprint(firstKek), 'after.bin': keyFingerprint(newKek) });
    // Without the old key the old object cannot be opened (it really was wrapped by it).
    keys.master = masterStore(newKek);
    expect((await get('rotated.bin')).status).to.equal(500);
    keys.master = masterStore(newKek, firstKek);
  });

  it('instant upload never links an encrypted object to stored bytes, nor plaintext to encrypted bytes', async () => {
    const body = randomBytes(20_000);
    expect((await put('plain.bin', body)).status).to.equal(200);
    const res = await put('enc-instant.bin', body, { ...sseHeader({ method: 'AES256' }), 'x-strata-instant-md5': md5(body) });
    expect(((await res.json()) as { instant: boolean }).instant).to.equal(false);
    expect(await locatorOf('enc-instant.bin')).to.not.equal(await locatorOf('plain.bin'));
    const res2 = await put('enc-instant-2.bin', body, { ...sseHeader({ method: 'AES256' }) });
    expect(res2.status).to.equal(200);
    expect(await locatorOf('enc-instant-2.bin')).to.not.equal(await locatorOf('enc-instant.bin'));
  });

  it('multipart: each part its own encrypted segment; whole and ranged reads across part borders; the ETag of the plaintext parts', async () => {
    const init = await layer.dpFetch('POST', `/internal/multipart/${bucket}/mp.bin`, JSON.stringify({ owner: 'alice' }), {
      'content-type': 'application/json',
      ...sseHeader({ customerKey }),
    });
    const { uploadId, sse } = (await init.json()) as { uploadId: string; sse: unknown };
    expect(sse).to.have.property('customerKeyMd5');
    const parts = [randomBytes(5 * 1024 * 1024 + 17), randomBytes(CHUNK + 5)];
    const etags: string[] = [];
    for (const [i, part] of parts.entries()) {
      const path = `/internal/multipart/${bucket}/mp.bin/${uploadId}/parts/${i + 1}`;
      // Every part needs the customer key, as S3 requires.
      if (i === 0)
        expect(await errorOf(await layer.dpFetch('PUT', path, part as unknown as BodyInit, { 'content-length': String(part.length) }))).to.deep.equal({
          status: 400,
          code: 'InvalidRequest',
        });
      const res = await layer.dpFetch('PUT', path, part as unknown as BodyInit, { 'content-length': String(part.length), ...sseHeader({ customerKey }) });
      expect(res.status).to.equal(200);
      etags.push(((await res.json()) as { etag: string }).etag);
    }
    expect(etags).to.deep.equal(parts.map(md5));
    const [done, hashed] = await hashedDuring(() =>
      layer.dpFetch(
        'POST',
        `/internal/multipart/${bucket}/mp.bin/${uploadId}/complete`,
        JSON.stringify({ parts: etags.map((etag, i) => ({ partNumber: i + 1, etag })) }),
        { 'content-type': 'application/json' },
      ),
    );
    expect(done.status).to.equal(200);
    // The composed ciphertext is not hashed (an encrypted blob keeps no MD5).
    expect(hashed, 'bytes hashed on the MD5 thread by the completion').to.equal(0);
    const meta = (await done.json()) as { size: number; sse: unknown };
    const whole = Buffer.concat(parts);
    expect(meta.size).to.equal(whole.length);
    expect(meta.sse).to.deep.equal(sse);
    expect(Buffer.from(await (await get('mp.bin', sseHeader({ customerKey }))).arrayBuffer()).equals(whole)).to.equal(true);
    const start = parts[0]!.length - 100;
    const end = parts[0]!.length + CHUNK + 1;
    const ranged = await get('mp.bin', { ...sseHeader({ customerKey }), range: `bytes=${start}-${end}` });
    expect(Buffer.from(await ranged.arrayBuffer()).equals(whole.subarray(start, end + 1))).to.equal(true);
    expect((await get('mp.bin')).status).to.equal(400);
  });

  it('copy: SSE-S3 to SSE-S3 shares the bytes; SSE-C to clear and clear to SSE-C re-encrypt (the source key is needed)', async () => {
    const body = randomBytes(CHUNK * 2 + 9);
    expect((await put('src-s3.bin', body, sseHeader({ method: 'AES256' }))).status).to.equal(200);
    const copy = (key: string, source: string, headers: Record<string, string>) =>
      layer.dpFetch('POST', `/internal/objects/${bucket}/${key}/copy`, JSON.stringify({ owner: 'alice', sourceBucket: bucket, sourceKey: source }), {
        'content-type': 'application/json',
        ...headers,
      });
    const shared = await copy('dst-s3.bin', 'src-s3.bin', sseHeader({ method: 'AES256' }));
    expect(shared.status).to.equal(200);
    expect(await locatorOf('dst-s3.bin')).to.equal(await locatorOf('src-s3.bin'));
    expect(Buffer.from(await (await get('dst-s3.bin')).arrayBuffer()).equals(body)).to.equal(true);
    // To SSE-C: new bytes under the customer's key.
    expect((await copy('dst-c.bin', 'src-s3.bin', sseHeader({ customerKey }))).status).to.equal(200);
    expect((await get('dst-c.bin')).status).to.equal(400);
    expect(Buffer.from(await (await get('dst-c.bin', sseHeader({ customerKey }))).arrayBuffer()).equals(body)).to.equal(true);
    // From SSE-C: without the source's key 400, with a wrong one 403; with it the copy is in the clear.
    expect(await errorOf(await copy('dst-clear.bin', 'dst-c.bin', {}))).to.deep.equal({ status: 400, code: 'InvalidRequest' });
    expect(await errorOf(await copy('dst-clear.bin', 'dst-c.bin', sseHeader({ copySourceCustomerKey: randomBytes(32).toString('base64') })))).to.deep.equal({
      status: 403,
      code: 'AccessDenied',
    });
    const clear = await copy('dst-clear.bin', 'dst-c.bin', sseHeader({ copySourceCustomerKey: customerKey }));
    expect(clear.status).to.equal(200);
    expect(((await clear.json()) as { sse?: unknown }).sse).to.equal(undefined);
    const plain = await get('dst-clear.bin');
    expect(plain.headers.get('x-strata-sse-answer')).to.equal(null);
    expect(Buffer.from(await plain.arrayBuffer()).equals(body)).to.equal(true);
  });
});
