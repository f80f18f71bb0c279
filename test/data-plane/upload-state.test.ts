import { expect } from 'chai';
import { v7 as uuidv7 } from 'uuid';
import { UploadState, type UploadInfo } from '../../images/data-plane/src/uploads/upload-state.js';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { rejectionOf } from '../support/rejection.js';

/**
 * A create writes the upload's set members before its record, so a member without a record is either a
 * create under way or what a failed create left: skipped at once, dropped only once old enough.
 */
describe('data plane multipart state: set members without a record', () => {
  const info = (bucketId: number, account: string): UploadInfo => ({
    bucketId,
    bucket: 'b',
    key: 'k',
    owner: account,
    contentType: 'application/octet-stream',
    userMetadata: {},
    initiated: new Date().toISOString(),
    backendKey: 'fs',
    account,
  });

  it('a listing skips a member whose record is missing, and drops it only once it is older than a create can take', async () => {
    const cache = new InMemoryCache();
    let now = Date.now();
    const state = new UploadState(cache, () => new Date(now));
    const live = uuidv7();
    await state.create(live, info(7, 'erin'), 10);
    // A create under way: its id is in the bucket's set, its record not written yet.
    const pending = uuidv7();
    await cache.sadd('strata:mpu-bucket-id:{7}', pending);
    expect((await state.uploadsOf(7)).map((u) => u.uploadId)).to.deep.equal([live]);
    expect((await cache.smembers('strata:mpu-bucket-id:{7}')).sort()).to.deep.equal([live, pending].sort());
    // Its record arrives: it is an upload like any other.
    await cache.hset(`strata:mpu:{${pending}}`, 'info', JSON.stringify(info(7, 'erin')));
    expect((await state.uploadsOf(7)).map((u) => u.uploadId).sort()).to.deep.equal([live, pending].sort());
    // Left by a create that failed: dropped once a minute has passed.
    const left = uuidv7();
    await cache.sadd('strata:mpu-bucket-id:{7}', left);
    now += 61_000;
    expect((await state.uploadsOf(7)).map((u) => u.uploadId).sort()).to.deep.equal([live, pending].sort());
    expect((await cache.smembers('strata:mpu-bucket-id:{7}')).sort()).to.deep.equal([live, pending].sort());
  });

  it("the account's cap counts a member without a record while a create may still be under way, and not after", async () => {
    const cache = new InMemoryCache();
    let now = Date.now();
    const state = new UploadState(cache, () => new Date(now));
    await state.create(uuidv7(), info(1, 'frank'), 2);
    await cache.sadd('strata:mpu-account:{frank}', uuidv7());
    expect(await rejectionOf(state.create(uuidv7(), info(1, 'frank'), 2))).to.have.property('code', 'SlowDown');
    now += 61_000;
    await state.create(uuidv7(), info(1, 'frank'), 2);
    expect(await cache.scard('strata:mpu-account:{frank}')).to.equal(2);
  });
});
