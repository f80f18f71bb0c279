import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { startObjectLayer, type ObjectLayer } from './harness.js';

/** The multipart cache, with a hook that runs (once) when an upload's parts are read. */
class HookedCache extends InMemoryCache {
  onPartsRead: (() => Promise<void>) | undefined;
  override async hgetall(key: string): Promise<Record<string, string>> {
    const all = await super.hgetall(key);
    const hook = this.onPartsRead;
    this.onPartsRead = undefined;
    if (hook && key.startsWith('strata:mpu:')) await hook();
    return all;
  }
}

/**
 * Issue #42 finding 10: a part saved while its upload ends (an UploadPart racing a Complete that omits
 * it) and a part replaced by a concurrent save of the same part number (an UploadPartCopy whose client
 * reset and retried while the first still ran) leave no part file behind once the upload has ended:
 * they go with it, not with the part sweep days later.
 */
describe('data plane multipart: parts saved in a race leave no file behind', function () {
  this.timeout(90_000);
  const cache = new HookedCache();
  let layer: ObjectLayer;
  let bucket: string;

  before(async () => {
    layer = await startObjectLayer('postgres', { inlineBlobBytes: 0, multipartCache: cache });
    bucket = `race-${randomBytes(4).toString('hex')}`;
    expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
  });
  after(async () => {
    await layer?.stop();
  });

  const json = { 'content-type': 'application/json' };
  const partFiles = async () => (await layer.files()).filter((f) => f.startsWith('blobs/parts/'));
  const initiate = async (key: string) => {
    const res = await layer.dpFetch('POST', `/internal/multipart/${bucket}/${key}`, JSON.stringify({ owner: 'alice' }), json);
    return ((await res.json()) as { uploadId: string }).uploadId;
  };
  const uploadPart = async (key: string, uploadId: string, n: number, body: Buffer) => {
    const res = await layer.dpFetch('PUT', `/internal/multipart/${bucket}/${key}/${uploadId}/parts/${n}`, body as BodyInit);
    return { status: res.status, etag: res.status === 200 ? ((await res.json()) as { etag: string }).etag : '' };
  };
  const complete = (key: string, uploadId: string, parts: Array<{ partNumber: number; etag: string }>) =>
    layer.dpFetch('POST', `/internal/multipart/${bucket}/${key}/${uploadId}/complete`, JSON.stringify({ parts }), json);

  it('an UploadPart saved after a Complete read the parts, which omits it: its file goes with the upload', async () => {
    const uploadId = await initiate('racing');
    const one = await uploadPart('racing', uploadId, 1, randomBytes(10_000));
    // The second part lands after the Complete has read the parts, before it ends the upload.
    let late: { status: number } | undefined;
    cache.onPartsRead = async () => {
      late = await uploadPart('racing', uploadId, 2, randomBytes(10_000));
    };
    const res = await complete('racing', uploadId, [{ partNumber: 1, etag: one.etag }]);
    expect(res.status, await res.text()).to.equal(200);
    expect(late?.status).to.equal(200);
    expect(await partFiles()).to.deep.equal([]);
  });

  it('concurrent saves of one part number (a client that reset and retried): the replaced ones go at once, the rest with the upload', async () => {
    const uploadId = await initiate('same-part');
    const bodies = Array.from({ length: 6 }, () => randomBytes(20_000));
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all(bodies.map((b) => uploadPart('same-part', uploadId, 1, b)));
      expect(results.map((r) => r.status)).to.deep.equal(bodies.map(() => 200));
      // One part 1 is recorded: exactly one part file is left.
      expect(await partFiles(), `round ${round}`).to.have.length(1);
    }
    expect((await layer.dpFetch('DELETE', `/internal/multipart/${bucket}/same-part/${uploadId}`)).status).to.equal(204);
    expect(await partFiles()).to.deep.equal([]);
  });
});
