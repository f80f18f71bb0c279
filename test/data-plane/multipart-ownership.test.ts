import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { DEFAULT_BUCKET_NAME_HOLD_MS } from '../../images/control-plane/src/app.js';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { CacheUnavailableError } from '../../images/service-kit/src/index.js';
import { startObjectLayer, type ObjectLayer } from './harness.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const json = { 'content-type': 'application/json' };

/** The real in-memory cache, with one kind of write made to fail as an unreachable Redis master would. */
class FailingCache extends InMemoryCache {
  failing: 'set' | 'del' | 'srem' | 'sadd' | 'hset' | undefined;
  /** Every hash ever written (to look for upload records left behind). */
  readonly hashes = new Set<string>();

  private check(call: string): void {
    if (this.failing === call) throw new CacheUnavailableError(call, new Error('master down'));
  }

  override async set(key: string, value: string, ttlSeconds?: number): Promise<void> {
    this.check('set');
    return super.set(key, value, ttlSeconds);
  }

  override async del(...keys: string[]): Promise<number> {
    this.check('del');
    return super.del(...keys);
  }

  override async srem(key: string, member: string): Promise<void> {
    this.check('srem');
    return super.srem(key, member);
  }

  override async sadd(key: string, member: string, ttlSeconds?: number): Promise<void> {
    this.check('sadd');
    return super.sadd(key, member, ttlSeconds);
  }

  override async hset(key: string, field: string, value: string, ttlSeconds?: number): Promise<void> {
    this.hashes.add(key);
    this.check('hset');
    return super.hset(key, field, value, ttlSeconds);
  }
}

/** Multipart calls of the internal API against one object layer. */
function multipartCalls(layer: () => ObjectLayer) {
  const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });
  return {
    errorOf,
    createBucket: async (bucket: string, owner: string) =>
      expect((await layer().cpFetch('PUT', `/internal/buckets/${bucket}`, { owner })).status).to.equal(200),
    initiate: (bucket: string, key: string) =>
      layer().dpFetch('POST', `/internal/multipart/${bucket}/${key}`, JSON.stringify({ contentType: 'text/plain' }), json),
    uploadId: async (res: Response) => {
      expect(res.status, await res.clone().text()).to.equal(200);
      return ((await res.json()) as { uploadId: string }).uploadId;
    },
    uploadPart: async (bucket: string, key: string, uploadId: string, n: number, body: Buffer) => {
      const res = await layer().dpFetch('PUT', `/internal/multipart/${bucket}/${key}/${uploadId}/parts/${n}`, body as BodyInit);
      expect(res.status, await res.clone().text()).to.equal(200);
      return ((await res.json()) as { etag: string }).etag;
    },
    complete: (bucket: string, key: string, uploadId: string, parts: Array<{ partNumber: number; etag: string }>) =>
      layer().dpFetch('POST', `/internal/multipart/${bucket}/${key}/${uploadId}/complete`, JSON.stringify({ parts }), json),
    listUploads: async (bucket: string) =>
      ((await (await layer().dpFetch('GET', `/internal/multipart/${bucket}`)).json()) as { uploads: Array<{ uploadId: string }> }).uploads.map(
        (u) => u.uploadId,
      ),
    partFiles: async () => (await layer().files()).filter((f) => f.startsWith('blobs/parts/')),
  };
}

describe('data plane multipart: uploads belong to their bucket, Complete is idempotent, uploads are capped per account (PostgreSQL)', function () {
  this.timeout(90_000);
  let layer: ObjectLayer;
  const cache = new FailingCache();
  const mp = multipartCalls(() => layer);
  const name = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

  before(async () => {
    layer = await startObjectLayer('postgres', { cache, multipartUploadsPerAccount: 3 });
  });
  after(async () => {
    await layer?.stop();
  });
  afterEach(() => {
    cache.failing = undefined;
  });

  it("DeleteBucket aborts the bucket's uploads and frees their parts; a later owner of the name never sees them", async () => {
    const bucket = name('handed-on');
    await mp.createBucket(bucket, 'alice');
    const uploadId = await mp.uploadId(await mp.initiate(bucket, 'secret.txt'));
    const part = randomBytes(1000);
    const etag = await mp.uploadPart(bucket, 'secret.txt', uploadId, 1, part);
    expect(await mp.partFiles()).to.have.length.greaterThan(0);
    // Only live objects keep a bucket: uploads in progress do not (as S3).
    expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
    expect(await mp.partFiles()).to.deep.equal([]);

    // After the name's hold, bob takes it.
    layer.clock.now = new Date(layer.clock.now.getTime() + DEFAULT_BUCKET_NAME_HOLD_MS + 1000);
    await mp.createBucket(bucket, 'bob');
    expect(await mp.listUploads(bucket)).to.deep.equal([]);
    expect(await mp.errorOf(await layer.dpFetch('GET', `/internal/multipart/${bucket}/secret.txt/${uploadId}/parts`))).to.deep.equal({
      status: 404,
      code: 'NoSuchUpload',
    });
    expect(await mp.errorOf(await mp.complete(bucket, 'secret.txt', uploadId, [{ partNumber: 1, etag }]))).to.deep.equal({ status: 404, code: 'NoSuchUpload' });
    expect((await layer.dpFetch('GET', `/internal/objects/${bucket}/secret.txt`)).status).to.equal(404);
  });

  it('an upload whose bucket was deleted without its uploads being aborted stays unreachable under the same name', async () => {
    const bucket = name('orphaned');
    await mp.createBucket(bucket, 'alice');
    const uploadId = await mp.uploadId(await mp.initiate(bucket, 'k'));
    const etag = await mp.uploadPart(bucket, 'k', uploadId, 1, randomBytes(100));
    // The bucket row goes as DeleteBucket removes it, but the data plane is never told.
    await layer.sql.query('DELETE FROM buckets WHERE name = $1', [bucket]);
    await new Promise((r) => setTimeout(r, 2100)); // the data plane's bucket records live 2 s
    await mp.createBucket(bucket, 'bob');
    expect(await mp.listUploads(bucket)).to.deep.equal([]);
    expect(await mp.errorOf(await mp.complete(bucket, 'k', uploadId, [{ partNumber: 1, etag }]))).to.deep.equal({ status: 404, code: 'NoSuchUpload' });
    expect(await mp.errorOf(await layer.dpFetch('DELETE', `/internal/multipart/${bucket}/k/${uploadId}`))).to.deep.equal({ status: 404, code: 'NoSuchUpload' });
  });

  it('an upload begun (or completed) anonymously is listed as such and completes only into the bucket that admitted it, never one created again since', async () => {
    const record = async (bucket: string) => {
      const { id, name: named, owner, backend } = (await (await layer.cpFetch('GET', `/internal/buckets/${bucket}`)).json()) as Record<string, unknown>;
      return { 'x-strata-bucket': JSON.stringify({ id, name: named, owner, backend }) };
    };
    // An account of its own: the uploads it leaves in progress count against no other test's cap.
    const outcomes: Record<string, number> = {};
    const cases = { signed: [false, false], 'begun anonymously': [true, false], 'completed anonymously': [false, true] } as const;
    for (const [label, [begunAnonymously, completedAnonymously]] of Object.entries(cases)) {
      const bucket = name('fence');
      await mp.createBucket(bucket, 'dora');
      const old = await record(bucket); // the record the gateway resolved (and whose ACL admitted the writer)
      const initiated = await layer.dpFetch(
        'POST',
        `/internal/multipart/${bucket}/k`,
        JSON.stringify({ owner: 'dora', ...(begunAnonymously ? { anonymous: true } : {}) }),
        { ...json, ...old },
      );
      const uploadId = await mp.uploadId(initiated);
      const etag = await mp.uploadPart(bucket, 'k', uploadId, 1, randomBytes(100));
      const listed = (await (await layer.dpFetch('GET', `/internal/multipart/${bucket}/k/${uploadId}/parts`, undefined, old)).json()) as {
        anonymous?: boolean;
      };
      expect(listed.anonymous, `${label}: listed as begun anonymously`).to.equal(begunAnonymously ? true : undefined);
      // The owner deletes the bucket (its uploads not yet ended) and creates the name again while the Complete is on its way.
      await layer.sql.query('DELETE FROM buckets WHERE name = $1', [bucket]);
      await mp.createBucket(bucket, 'dora');
      const body = JSON.stringify({ parts: [{ partNumber: 1, etag }], ...(completedAnonymously ? { anonymous: true } : {}) });
      const completed = await layer.dpFetch('POST', `/internal/multipart/${bucket}/k/${uploadId}/complete`, body, { ...json, ...old });
      outcomes[label] = completed.status;
      expect((await layer.dpFetch('GET', `/internal/objects/${bucket}/k`)).status, `${label}: the object in the new bucket`).to.equal(
        begunAnonymously || completedAnonymously ? 404 : 200,
      );
    }
    // The owner's own upload follows its bucket (rb then mb); an anonymous one, or an anonymous completion, is NoSuchBucket.
    expect(outcomes).to.deep.equal({ signed: 200, 'begun anonymously': 404, 'completed anonymously': 404 });
  });

  it('a retried Complete of a completed upload answers 200 with the same ETag', async () => {
    const bucket = name('retried');
    await mp.createBucket(bucket, 'alice');
    const uploadId = await mp.uploadId(await mp.initiate(bucket, 'obj'));
    const body = randomBytes(2000);
    const etag = await mp.uploadPart(bucket, 'obj', uploadId, 1, body);
    const first = await mp.complete(bucket, 'obj', uploadId, [{ partNumber: 1, etag }]);
    expect(first.status).to.equal(200);
    const firstMeta = (await first.json()) as { etag: string; size: number };
    const again = await mp.complete(bucket, 'obj', uploadId, [{ partNumber: 1, etag }]);
    expect(again.status, await again.clone().text()).to.equal(200);
    expect(await again.json()).to.deep.equal(firstMeta);
    expect(firstMeta.etag).to.equal(`${md5(Buffer.from(etag, 'hex'))}-1`);
    // Not in another bucket, nor for another key.
    const other = name('other');
    await mp.createBucket(other, 'alice');
    expect(await mp.errorOf(await mp.complete(other, 'obj', uploadId, [{ partNumber: 1, etag }]))).to.deep.equal({ status: 404, code: 'NoSuchUpload' });
    expect(await mp.errorOf(await mp.complete(bucket, 'other-key', uploadId, [{ partNumber: 1, etag }]))).to.deep.equal({ status: 404, code: 'NoSuchUpload' });
  });

  for (const failing of ['set', 'del', 'srem'] as const) {
    it(`a Complete whose cleanup fails after the commit (cache ${failing} failing) answers 200, and so does its retry`, async () => {
      const bucket = name('committed');
      await mp.createBucket(bucket, 'alice');
      const partsBefore = await mp.partFiles();
      const uploadId = await mp.uploadId(await mp.initiate(bucket, 'obj'));
      const body = randomBytes(3000);
      const etag = await mp.uploadPart(bucket, 'obj', uploadId, 1, body);
      cache.failing = failing;
      const first = await mp.complete(bucket, 'obj', uploadId, [{ partNumber: 1, etag }]);
      expect(first.status, await first.clone().text()).to.equal(200);
      const meta = (await first.json()) as { etag: string };
      cache.failing = undefined;
      const retried = await mp.complete(bucket, 'obj', uploadId, [{ partNumber: 1, etag }]);
      expect(retried.status, await retried.clone().text()).to.equal(200);
      expect(((await retried.json()) as { etag: string }).etag).to.equal(meta.etag);
      expect(Buffer.from(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/obj`)).arrayBuffer()).equals(body)).to.equal(true);
      // Nothing of the upload is left once the retry has finished its cleanup.
      expect(await mp.listUploads(bucket)).to.deep.equal([]);
      expect(await mp.partFiles()).to.deep.equal(partsBefore);
    });
  }

  for (const failing of ['sadd', 'hset'] as const) {
    it(`a create that fails (cache ${failing} failing) leaves nothing: no upload record, no member of the bucket's or the account's set`, async () => {
      const bucket = name('half-made');
      await mp.createBucket(bucket, 'erin');
      const kept = await mp.uploadId(await mp.initiate(bucket, 'kept'));
      cache.failing = failing;
      expect(await mp.errorOf(await mp.initiate(bucket, 'lost'))).to.deep.equal({ status: 503, code: 'ServiceUnavailable' });
      cache.failing = undefined;
      const records = [];
      for (const key of cache.hashes) if (key.startsWith('strata:mpu:{') && (await cache.hget(key, 'info'))?.includes('"erin"')) records.push(key);
      expect(records).to.deep.equal([`strata:mpu:{${kept}}`]);
      const bucketId = (await layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [bucket])).rows[0]!.id;
      expect(await cache.smembers(`strata:mpu-bucket-id:{${bucketId}}`)).to.deep.equal([kept]);
      expect(await cache.smembers('strata:mpu-account:{erin}')).to.deep.equal([kept]);
      expect(await mp.listUploads(bucket)).to.deep.equal([kept]);
      expect((await layer.dpFetch('DELETE', `/internal/multipart/${bucket}/kept/${kept}`)).status).to.equal(204);
    });
  }

  it("caps an account's uploads in progress: SlowDown past the limit, room again once one ends; other accounts unaffected", async () => {
    const bucket = name('capped');
    await mp.createBucket(bucket, 'carol');
    const second = name('capped-too');
    await mp.createBucket(second, 'carol');
    const ids = [
      await mp.uploadId(await mp.initiate(bucket, 'a')),
      await mp.uploadId(await mp.initiate(bucket, 'b')),
      await mp.uploadId(await mp.initiate(second, 'c')),
    ];
    // The cap is per account, over all its buckets.
    expect(await mp.errorOf(await mp.initiate(second, 'd'))).to.deep.equal({ status: 503, code: 'SlowDown' });
    const dave = name('dave');
    await mp.createBucket(dave, 'dave');
    await mp.uploadId(await mp.initiate(dave, 'x'));
    expect((await layer.dpFetch('DELETE', `/internal/multipart/${bucket}/a/${ids[0]}`)).status).to.equal(204);
    await mp.uploadId(await mp.initiate(second, 'd'));
    // A completed upload makes room as well.
    const etag = await mp.uploadPart(bucket, 'b', ids[1]!, 1, randomBytes(10));
    expect((await mp.complete(bucket, 'b', ids[1]!, [{ partNumber: 1, etag }])).status).to.equal(200);
    await mp.uploadId(await mp.initiate(bucket, 'e'));
    expect(await mp.errorOf(await mp.initiate(bucket, 'f'))).to.deep.equal({ status: 503, code: 'SlowDown' });
  });
});
