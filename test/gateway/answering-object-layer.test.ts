import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { answeringObjectLayer, ObjectAnswerCache } from '../../images/gateway/src/clients/object-answer-cache.js';
import { Readable } from 'node:stream';
import type { GetObjectInput, ObjectLayer, PutObjectInput } from '../../images/object-model/src/index.js';
import { invalidateObjectRead } from '../../images/object-model/src/object-read-cache.js';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { FakeObjectLayer } from './fake-object-layer.js';
import { codeOf, handlerApp, type HandlerApp } from './handler-app.js';

/**
 * The gateway's kept answers sit in front of the object layer (answeringObjectLayer): GetObject and
 * HeadObject have one read path, and what a kept answer says (200 with its bytes, 304, 412) is
 * decided by the same rule as the layer's. Two gateways keep their own answers and share the version
 * tokens (the shared cache): a write acknowledged through one is never hidden from a GET through the other.
 */
describe('gateway: answers kept in front of the object layer', () => {
  let dataPlane: FakeObjectLayer;
  let shared: InMemoryCache;
  let a: HandlerApp;
  let b: HandlerApp;
  const v1 = randomBytes(4096);

  /** The layer behind both gateways: the fake, whose writes replace the version token after they commit (as the data plane's do). */
  function committingLayer(fake: FakeObjectLayer): ObjectLayer {
    return new Proxy(fake, {
      get: (target, name) => {
        const method = (target as unknown as Record<PropertyKey, unknown>)[name];
        if (name !== 'putObject') return typeof method === 'function' ? method.bind(target) : () => Promise.reject(new Error(`no ${String(name)}`));
        return async (bucket: string, key: string, input: PutObjectInput, body: never) => {
          const result = await target.putObject(bucket, key, input, body);
          await invalidateObjectRead(shared, bucket, key);
          return result;
        };
      },
    }) as unknown as ObjectLayer;
  }
  const gateway = (layer: ObjectLayer) => handlerApp(answeringObjectLayer(layer, new ObjectAnswerCache(shared, 1 << 20, 64 << 10)));
  const reads = () => dataPlane.callsOf('getObject').length;

  beforeEach(async () => {
    dataPlane = new FakeObjectLayer();
    dataPlane.addBucket('bkt', 'alice');
    dataPlane.store('bkt', 'k.bin', v1);
    shared = new InMemoryCache();
    const layer = committingLayer(dataPlane);
    [a, b] = await Promise.all([gateway(layer), gateway(layer)]);
  });
  afterEach(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it('answers a repeated GET, a HEAD, a 304 and a 412 from the kept answer, and a range from the layer', async () => {
    const first = await a.fetch('GET', '/bkt/k.bin');
    expect(Buffer.from(await first.arrayBuffer())).to.deep.equal(v1);
    const etag = first.headers.get('etag')!;
    expect(reads()).to.equal(1);

    const again = await a.fetch('GET', '/bkt/k.bin');
    expect(again.status).to.equal(200);
    expect(Buffer.from(await again.arrayBuffer())).to.deep.equal(v1);
    for (const name of ['etag', 'last-modified', 'content-type', 'content-length']) expect(again.headers.get(name)).to.equal(first.headers.get(name));
    const head = await a.fetch('HEAD', '/bkt/k.bin');
    expect([head.status, head.headers.get('content-length'), head.headers.get('etag')]).to.deep.equal([200, '4096', etag]);
    const notModified = await a.fetch('GET', '/bkt/k.bin', { headers: { 'if-none-match': etag } });
    expect([notModified.status, notModified.headers.get('etag'), (await notModified.arrayBuffer()).byteLength]).to.deep.equal([304, etag, 0]);
    const since = await a.fetch('GET', '/bkt/k.bin', { headers: { 'if-modified-since': first.headers.get('last-modified')! } });
    expect(since.status).to.equal(304);
    const failed = await a.fetch('GET', '/bkt/k.bin', { headers: { 'if-match': '"0123456789abcdef0123456789abcdef"' } });
    expect([failed.status, codeOf(await failed.text())]).to.deep.equal([412, 'PreconditionFailed']);
    expect(reads()).to.equal(1);
    expect(dataPlane.bodiesOpened).to.equal(1);

    const range = await a.fetch('GET', '/bkt/k.bin', { headers: { range: 'bytes=10-19' } });
    expect(range.status).to.equal(206);
    expect(Buffer.from(await range.arrayBuffer())).to.deep.equal(v1.subarray(10, 20));
    expect(reads()).to.equal(2);
  });

  it("answers each request's own headers from one kept answer: its response-* overrides, and the checksum only when asked", async () => {
    dataPlane.store('bkt', 'meta.bin', v1, {
      userMetadata: { colour: 'blue' },
      headers: { 'cache-control': 'max-age=60', 'x-amz-checksum-crc32': 'AAAAAA==', 'x-amz-checksum-type': 'FULL_OBJECT' },
      tags: [{ key: 't', value: 'v' }],
    });
    const plain = await a.fetch('GET', '/bkt/meta.bin');
    expect(Buffer.from(await plain.arrayBuffer())).to.deep.equal(v1);
    const headersOf = (r: Response) =>
      ['content-type', 'content-disposition', 'cache-control', 'x-amz-meta-colour', 'x-amz-checksum-crc32', 'x-amz-tagging-count'].map((n) => r.headers.get(n));
    expect(headersOf(plain)).to.deep.equal(['application/octet-stream', null, 'max-age=60', 'blue', null, '1']);
    const overridden = await a.fetch('GET', '/bkt/meta.bin?response-content-type=text/plain&response-content-disposition=attachment');
    expect(headersOf(overridden)).to.deep.equal(['text/plain', 'attachment', 'max-age=60', 'blue', null, '1']);
    const withChecksum = await a.fetch('GET', '/bkt/meta.bin', { headers: { 'x-amz-checksum-mode': 'ENABLED' } });
    expect(headersOf(withChecksum)).to.deep.equal(['application/octet-stream', null, 'max-age=60', 'blue', 'AAAAAA==', '1']);
    // The next plain GET of the same kept answer carries neither the overrides nor the checksum.
    const again = await a.fetch('GET', '/bkt/meta.bin');
    expect(headersOf(again)).to.deep.equal(headersOf(plain));
    expect(reads()).to.equal(1);
  });

  it('never serves a replaced version: a PUT through one gateway is seen by the next GET through the other', async () => {
    const old = await a.fetch('GET', '/bkt/k.bin');
    const oldEtag = old.headers.get('etag')!;
    await old.arrayBuffer();
    expect((await a.fetch('HEAD', '/bkt/k.bin')).status).to.equal(200);
    expect(reads()).to.equal(1);

    const v2 = randomBytes(4096);
    const put = await b.fetch('PUT', '/bkt/k.bin', { body: v2 as unknown as string });
    expect(put.status).to.equal(200);

    const fresh = await a.fetch('GET', '/bkt/k.bin');
    expect(Buffer.from(await fresh.arrayBuffer())).to.deep.equal(v2);
    expect(fresh.headers.get('etag')).to.not.equal(oldEtag);
    // The old ETag no longer matches: the new bytes, not a 304 from the old answer.
    const conditional = await a.fetch('GET', '/bkt/k.bin', { headers: { 'if-none-match': oldEtag } });
    expect(conditional.status).to.equal(200);
    expect(Buffer.from(await conditional.arrayBuffer())).to.deep.equal(v2);
    expect(reads()).to.equal(2);
  });

  it('keeps no answer of an encrypted object, of a read with a customer key, or of an object above its size limit', async () => {
    dataPlane.store('bkt', 'sse.bin', randomBytes(100), { sse: { algorithm: 'AES256' } });
    dataPlane.store('bkt', 'big.bin', randomBytes(70 * 1024));
    for (const key of ['sse.bin', 'big.bin']) {
      for (let i = 0; i < 2; i++) expect((await a.fetch('GET', `/bkt/${key}`)).status).to.equal(200);
    }
    expect(reads()).to.equal(4);
    expect((await a.fetch('GET', '/bkt/k.bin')).status).to.equal(200);
    const key = randomBytes(32);
    const customerKey = {
      'x-amz-server-side-encryption-customer-algorithm': 'AES256',
      'x-amz-server-side-encryption-customer-key': key.toString('base64'),
      'x-amz-server-side-encryption-customer-key-md5': createHash('md5').update(key).digest('base64'),
    };
    expect((await a.fetch('GET', '/bkt/k.bin', { headers: customerKey })).status).to.equal(200);
    expect(reads()).to.equal(6);
  });

  it('cuts the answer of a body cut short upstream, and keeps nothing of it', async () => {
    let reads = 0;
    const cutting = new Proxy(committingLayer(dataPlane), {
      get: (target, name) =>
        name !== 'getObject'
          ? (target as unknown as Record<PropertyKey, unknown>)[name]
          : async (bucket: string, key: string, input: GetObjectInput) => {
              reads++;
              const read = await target.getObject(bucket, key, input);
              if (reads > 1) return read;
              const body = new Readable({ read() {} });
              body.push(v1.subarray(0, 100));
              setImmediate(() => body.destroy(new Error('the data plane went away')));
              return { ...read, body };
            },
    });
    const c = await gateway(cutting);
    try {
      const failed = await c.fetch('GET', '/bkt/k.bin').then(
        (res) => res.arrayBuffer().then(() => 'whole'),
        () => 'cut',
      );
      expect(failed).to.equal('cut');
      const next = await c.fetch('GET', '/bkt/k.bin');
      expect(Buffer.from(await next.arrayBuffer())).to.deep.equal(v1);
      expect(reads).to.equal(2);
    } finally {
      await c.close();
    }
  });
});
