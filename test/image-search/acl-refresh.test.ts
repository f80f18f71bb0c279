import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { pino } from 'pino';
import { BucketSource, mirrorPathOf } from '../../images/image-search/src/bucket-source.js';
import type { Caller } from '../../images/image-search/src/http/auth.js';
import { ImageAccess } from '../../images/image-search/src/image-access.js';
import { ImageFiles } from '../../images/image-search/src/image-files.js';
import { AclStore, standInIndex } from './support/acl-store.js';
import { tempDir } from './support/fixtures.js';

// A bucket source's rounds read only the ACLs that may have changed (acl-refresh.ts): none over an
// unchanged bucket of private images, a changed object's at the next round, every one at the full pass
// (IMAGE_SEARCH_ACL_REFRESH_S, on an injected clock), and those that grant beyond the bucket's owner at
// every round, so that access taken away shows as soon as before. The index is a stand-in: what is
// asked here is who may see which image, as ImageAccess answers from the source.
const BUCKET = 'gallery';
const OWNER = 'alice';
const REFRESH_S = 300;
const KEYS = Array.from({ length: 20 }, (_, i) => `photos/p${i}.png`);
const alice: Caller = { kind: 'user', username: OWNER };
const anonymous: Caller = { kind: 'anonymous' };
const bob: Caller = { kind: 'user', username: 'bob' };

describe('image-search: a bucket source reads an image’s ACL only when it may have changed', function () {
  this.timeout(60_000);
  let store: AclStore;
  let source: BucketSource;
  let access: ImageAccess;
  let now: number;
  let dir: string;

  /** One round; answers the GetObjectAcl requests it made (counted by the store) with its result. */
  const round = async () => {
    const before = store.aclRequests;
    const result = await source.sync();
    expect(result.aclReads).to.equal(store.aclRequests - before);
    return { ...result, aclRequests: store.aclRequests - before };
  };
  const sees = (caller: Caller, key: string) => access.mayRead(caller, mirrorPathOf(BUCKET, key));

  beforeEach(async () => {
    store = new AclStore(BUCKET, OWNER);
    await store.start();
    KEYS.forEach((key, i) => store.put(key, Buffer.from(`image ${i}`)));
    dir = tempDir('acl-refresh');
    now = Date.parse('2026-06-01T00:00:00Z');
    source = new BucketSource({
      location: { endpoint: store.endpoint, url: `s3://${BUCKET}/photos/`, region: 'us-east-1', accessKeyId: 'AK', secretAccessKey: 'SK' },
      files: new ImageFiles(dir),
      service: standInIndex(),
      logger: pino({ level: 'silent' }),
      aclRefreshSeconds: REFRESH_S,
      now: () => now,
    });
    access = new ImageAccess({ publicSources: [], ownerOf: (b) => source.ownerOf(b), objectOf: (p) => source.objectOf(p) });
    // The first round of a process reads every ACL (it cannot know what changed while it was down).
    expect((await round()).aclRequests).to.equal(KEYS.length);
  });
  afterEach(async () => {
    await source.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes no per-object ACL request in a round over an unchanged bucket of private images', async () => {
    for (let i = 0; i < 3; i++) {
      now += 60_000;
      const result = await round();
      expect(result.aclRequests).to.equal(0);
      expect(result.aclFullPass).to.equal(false);
    }
    expect(sees(alice, KEYS[0])).to.equal(true);
    expect(sees(bob, KEYS[0])).to.equal(false);
  });

  it('reads a changed object’s ACL at the next round: new content (ETag), or the same bytes rewritten (LastModified)', async () => {
    store.put(KEYS[1], Buffer.from('other content'), 'public-read');
    let result = await round();
    expect(result.aclRequests).to.equal(1);
    expect(result.replaced + result.added + result.downloaded).to.be.greaterThan(0);
    expect(sees(anonymous, KEYS[1])).to.equal(true);
    store.put(KEYS[2], Buffer.from('image 2'), 'authenticated-read');
    result = await round();
    expect(result.downloaded).to.equal(0);
    expect(sees(bob, KEYS[2])).to.equal(true);
    expect(sees(anonymous, KEYS[2])).to.equal(false);
  });

  it('reads the ACL of an object an event names at the next round', async () => {
    store.putAcl(KEYS[3], 'public-read');
    source.onObjectEvent(BUCKET, KEYS[3]);
    await source.stop(); // the round the event started
    expect(sees(anonymous, KEYS[3])).to.equal(true);
  });

  it('picks up an ACL-only change (private → public-read) at the full pass, and the way back (public-read → private) at the next round', async () => {
    store.putAcl(KEYS[4], 'public-read');
    now += (REFRESH_S - 1) * 1000;
    expect((await round()).aclRequests).to.equal(0);
    expect(sees(anonymous, KEYS[4])).to.equal(false); // late, never too wide
    now += 1000;
    const full = await round();
    expect(full.aclFullPass).to.equal(true);
    expect(full.aclRequests).to.equal(KEYS.length);
    expect(sees(anonymous, KEYS[4])).to.equal(true);
    // A public image's ACL is read every round (it alone), so taking access away shows as soon as before.
    now += 1000;
    expect((await round()).aclRequests).to.equal(1);
    store.putAcl(KEYS[4], 'private');
    now += 1000;
    await round();
    expect(sees(anonymous, KEYS[4])).to.equal(false);
    expect(sees(alice, KEYS[4])).to.equal(true);
    now += 1000;
    expect((await round()).aclRequests).to.equal(0);
  });

  it('takes bucket-level access away at the next round, and gives it back: the public access block (IgnorePublicAcls)', async () => {
    store.put(KEYS[5], Buffer.from('public one'), 'public-read');
    await round();
    expect(sees(anonymous, KEYS[5])).to.equal(true);
    store.ignorePublicAcls = true;
    await round();
    expect(sees(anonymous, KEYS[5])).to.equal(false);
    store.ignorePublicAcls = false;
    expect((await round()).aclRequests).to.equal(1);
    expect(sees(anonymous, KEYS[5])).to.equal(true);
  });

  it('reads every ACL each round with a refresh of 0 (the former cost)', async () => {
    source = new BucketSource({
      location: { endpoint: store.endpoint, url: `s3://${BUCKET}/photos/`, region: 'us-east-1', accessKeyId: 'AK', secretAccessKey: 'SK' },
      files: new ImageFiles(dir),
      service: standInIndex(),
      logger: pino({ level: 'silent' }),
      aclRefreshSeconds: 0,
      now: () => now,
    });
    expect((await round()).aclRequests).to.equal(KEYS.length);
    expect((await round()).aclRequests).to.equal(KEYS.length);
  });
});
