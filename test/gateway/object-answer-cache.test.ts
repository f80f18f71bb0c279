import { expect } from 'chai';
import { ObjectAnswerCache } from '../../images/gateway/src/clients/object-answer-cache.js';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { invalidateObjectRead } from '../../images/object-model/src/object-read-cache.js';

describe('gateway: ObjectAnswerCache', () => {
  const read = (size: number) => ({
    status: 200 as const,
    object: {
      bucket: 'b',
      key: 'k',
      size,
      etag: 'e',
      md5: null,
      contentType: 'application/octet-stream',
      userMetadata: {},
      lastModified: '2026-01-01T00:00:00.000Z',
    },
    contentLength: size,
  });
  const answer = (bytes: number, fill = 1) => ({ read: read(bytes), body: Buffer.alloc(bytes, fill) });

  it('serves an answer only under the version it was read at: a write after it hides it', async () => {
    const shared = new InMemoryCache();
    const cache = new ObjectAnswerCache(shared, 1024, 512);
    const v1 = (await cache.version('b', 'k'))!;
    expect(await cache.version('b', 'k')).to.equal(v1);
    cache.set('b', 'k', v1, answer(10));
    expect(cache.get('b', 'k', v1)?.body.length).to.equal(10);
    await invalidateObjectRead(shared, 'b', 'k');
    const v2 = (await cache.version('b', 'k'))!;
    expect(v2).to.not.equal(v1);
    expect(cache.get('b', 'k', v2)).to.equal(undefined);
    expect(cache.get('b', 'other', v1)).to.equal(undefined);
  });

  it('tells the version at once from a cache in this process (the token a read would get, a write after it seen), and never from one that only answers later', async () => {
    const memory = new InMemoryCache();
    const cache = new ObjectAnswerCache(memory, 1024, 512);
    expect(cache.versionNow('b', 'k')).to.equal(undefined);
    const v1 = (await cache.version('b', 'k'))!;
    expect(cache.versionNow('b', 'k')).to.equal(v1);
    await invalidateObjectRead(memory, 'b', 'k');
    const v2 = cache.versionNow('b', 'k');
    expect(v2).to.not.equal(v1);
    expect(v2).to.equal(await cache.version('b', 'k'));
    // A shared cache with no getNow (Redis): only the promise path.
    const remote = new ObjectAnswerCache({ get: (key) => memory.get(key), set: (key, value, ttl) => memory.set(key, value, ttl) }, 1024, 512);
    expect(remote.versionNow('b', 'k')).to.equal(undefined);
    expect(await remote.version('b', 'k')).to.equal(v2);
  });

  it('keeps a copy of the body, at most maxObjectBytes each and maxBytes in all, least recently used out first', () => {
    const cache = new ObjectAnswerCache(new InMemoryCache(), 300, 200);
    const shared = Buffer.alloc(1000, 7);
    cache.set('b', 'view', 'v', { read: read(100), body: shared.subarray(0, 100) });
    shared.fill(0);
    expect(cache.get('b', 'view', 'v')!.body).to.deep.equal(Buffer.alloc(100, 7));
    cache.set('b', 'big', 'v', answer(201));
    expect(cache.get('b', 'big', 'v')).to.equal(undefined);
    cache.set('b', 'a', 'v', answer(100));
    cache.set('b', 'c', 'v', answer(100));
    expect(cache.bytes).to.equal(300);
    cache.get('b', 'view', 'v'); // now the most recently used
    cache.set('b', 'd', 'v', answer(100));
    expect(cache.bytes).to.equal(300);
    expect(cache.get('b', 'a', 'v')).to.equal(undefined);
    expect(cache.get('b', 'view', 'v')).to.not.equal(undefined);
    cache.set('b', 'd', 'v2', answer(50));
    expect(cache.bytes).to.equal(250);
  });

  it('lets an answer expire as the data plane read cache does (30 s), and counts hits and misses', () => {
    let now = 1_000_000;
    const lookups: boolean[] = [];
    const cache = new ObjectAnswerCache(
      new InMemoryCache(),
      1024,
      512,
      (hit) => lookups.push(hit),
      () => now,
    );
    cache.set('b', 'k', 'v', answer(10));
    now += 29_000;
    expect(cache.get('b', 'k', 'v')).to.not.equal(undefined);
    now += 1_000;
    expect(cache.get('b', 'k', 'v')).to.equal(undefined);
    expect(lookups).to.deep.equal([true, false]);
  });

  it('answers no version when the shared cache fails (the data plane answers then)', async () => {
    const failing = { get: () => Promise.reject(new Error('down')), set: () => Promise.reject(new Error('down')) };
    expect(await new ObjectAnswerCache(failing, 1024, 512).version('b', 'k')).to.equal(undefined);
  });
});
