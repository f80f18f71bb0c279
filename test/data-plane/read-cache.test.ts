import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { invalidateObjectRead, objectReadCacheKeys, readThroughObjectCache } from '../../images/object-model/src/object-read-cache.js';
import { enc, startObjectLayer, type ObjectLayer } from './harness.js';

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

describe('object read cache (GET/HEAD metadata)', function () {
  this.timeout(60_000);

  describe('version tokens', () => {
    it('serves a stored entry only while its token is current', async () => {
      const cache = new InMemoryCache();
      let loads = 0;
      const load = async () => ({ n: ++loads });
      expect(await readThroughObjectCache(cache, 'b', 'k', load, () => true)).to.deep.equal({ n: 1 });
      expect(await readThroughObjectCache(cache, 'b', 'k', load, () => true)).to.deep.equal({ n: 1 });
      await invalidateObjectRead(cache, 'b', 'k');
      expect(await readThroughObjectCache(cache, 'b', 'k', load, () => true)).to.deep.equal({ n: 2 });
      expect(await readThroughObjectCache(cache, 'b', 'other', load, () => false)).to.deep.equal({ n: 3 });
      expect(await readThroughObjectCache(cache, 'b', 'other', load, () => false)).to.deep.equal({ n: 4 });
    });

    it('a read that raced a write never leaves a servable stale entry', async () => {
      const cache = new InMemoryCache();
      let db = 'old';
      // The reader takes its token, reads the OLD row, then the writer commits and invalidates before
      // the reader stores what it read.
      const slowLoad = async () => {
        const seen = db;
        db = 'new';
        await invalidateObjectRead(cache, 'b', 'k');
        return seen;
      };
      expect(await readThroughObjectCache(cache, 'b', 'k', slowLoad, () => true)).to.equal('old');
      expect(
        await readThroughObjectCache(
          cache,
          'b',
          'k',
          async () => db,
          () => true,
        ),
      ).to.equal('new');
    });

    it('an expired token cannot revive an old entry', async () => {
      let now = 0;
      const cache = new InMemoryCache(() => now);
      await readThroughObjectCache(
        cache,
        'b',
        'k',
        async () => 'v1',
        () => true,
      );
      await cache.del(objectReadCacheKeys.version('b', 'k'));
      expect(
        await readThroughObjectCache(
          cache,
          'b',
          'k',
          async () => 'v2',
          () => true,
        ),
      ).to.equal('v2');
      now += 3600_000;
      expect(
        await readThroughObjectCache(
          cache,
          'b',
          'k',
          async () => 'v3',
          () => true,
        ),
      ).to.equal('v3');
    });
  });

  describe('through the data and control planes', () => {
    let layer: ObjectLayer;
    before(async () => {
      layer = await startObjectLayer('pglite');
    });
    after(async () => {
      await layer?.stop();
    });

    const put = (bucket: string, key: string, body: Buffer) =>
      layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key)}`, body as BodyInit, { 'x-strata-owner': 'alice' });
    const etagOf = async (bucket: string, key: string, method = 'GET') => {
      const res = await layer.dpFetch(method, `/internal/objects/${bucket}/${enc(key)}`);
      if (method === 'GET') await res.arrayBuffer();
      return res.status === 200 ? res.headers.get('etag') : res.status;
    };

    it('every write path is visible to the next GET/HEAD at once', async () => {
      const bucket = `rc-${randomBytes(3).toString('hex')}`;
      expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
      const [a, b, c] = [randomBytes(100), randomBytes(200), randomBytes(300)];
      expect((await put(bucket, 'k', a)).status).to.equal(200);
      expect(await etagOf(bucket, 'k')).to.equal(`"${md5(a)}"`);
      expect(await etagOf(bucket, 'k')).to.equal(`"${md5(a)}"`);
      expect(await layer.cache.get(objectReadCacheKeys.entry(bucket, 'k'))).to.be.a('string');

      // overwrite
      expect((await put(bucket, 'k', b)).status).to.equal(200);
      expect(await etagOf(bucket, 'k', 'HEAD')).to.equal(`"${md5(b)}"`);
      expect(await etagOf(bucket, 'k')).to.equal(`"${md5(b)}"`);

      // copy onto the key
      expect((await put(bucket, 'src', c)).status).to.equal(200);
      const copy = await layer.dpFetch(
        'POST',
        `/internal/objects/${bucket}/k/copy`,
        JSON.stringify({ owner: 'alice', sourceBucket: bucket, sourceKey: 'src' }),
        {
          'content-type': 'application/json',
        },
      );
      expect(copy.status).to.equal(200);
      expect(await etagOf(bucket, 'k')).to.equal(`"${md5(c)}"`);

      // delete (control plane) and restore
      expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/k`)).status).to.equal(204);
      expect(await etagOf(bucket, 'k')).to.equal(404);
      expect(await etagOf(bucket, 'k', 'HEAD')).to.equal(404);
      const bin = (await (await layer.cpFetch('GET', `/internal/recycle-bin?bucket=${bucket}`)).json()) as { objects: Array<{ id: number; key: string }> };
      const recycled = bin.objects.find((o) => o.key === 'k')!;
      expect((await layer.cpFetch('POST', `/internal/recycle-bin/${recycled.id}/restore`, {})).status).to.equal(200);
      expect(await etagOf(bucket, 'k')).to.equal(`"${md5(c)}"`);

      // DeleteObjects
      expect(await etagOf(bucket, 'src')).to.equal(`"${md5(c)}"`);
      expect((await layer.cpFetch('POST', `/internal/buckets/${bucket}/delete-objects`, { keys: ['src', 'k'] })).status).to.equal(200);
      expect(await etagOf(bucket, 'src')).to.equal(404);
      expect(await etagOf(bucket, 'k')).to.equal(404);
    });
  });
});
