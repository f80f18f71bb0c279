import { CreateBucketCommand, PutObjectAclCommand, PutObjectCommand, PutPublicAccessBlockCommand, type ObjectCannedACL } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { BucketSource } from '../../images/image-search/src/bucket-source.js';
import { ImageFiles } from '../../images/image-search/src/image-files.js';
import type { ObjectEventSource, ObjectStoreEvent } from '../../images/image-search/src/object-events.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { launchChromium } from '../support/chromium.js';
import { JWT_SECRET, startTestPlatform, type TestPlatform } from '../e2e/support/platform.js';
import { createTenant, login, type Tenant } from '../e2e/support/s3.js';
import { AUTH_HEADER, colourImage, makeTestModel, PALETTE, tempDir, TEST_API_KEY } from './support/fixtures.js';
import { standInIndex } from './support/acl-store.js';
import { until } from './support/s3rver.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

// Image search following a bucket of Strata's own object store (the real gateway, with ACLs): results
// name the bucket object (not the mirror's hashed path), and a bucket image is shown to whom the
// gateway would let GET its object.
const BUCKET = 'iskeys-photos';
const ADVERSARIAL = ['cams/x.jpg', 'cams/x.jpg/inner.jpg', 'cams/ünï cödé <b>bold</b> & spaces.png', `cams/${'long-'.repeat(180)}end.png`];
const ACL_KEYS: Record<string, { acl?: ObjectCannedACL; grantRead?: string }> = {
  'acl/private.png': {},
  'acl/public.png': { acl: 'public-read' },
  'acl/authenticated.png': { acl: 'authenticated-read' },
  'acl/granted.png': { grantRead: 'id="iskeys-bob"' },
};

describe('image-search: results name their bucket object and follow the object store’s ACLs', function () {
  this.timeout(180_000);
  let platform: TestPlatform;
  let alice: Tenant;
  let service: RunningService;
  let deliver: ((event: ObjectStoreEvent) => Promise<void>) | undefined;
  const dirs: string[] = [];
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  let as: Record<'alice' | 'bob' | 'carol' | 'anonymous', Record<string, string>>;

  const indexStatus = async (): Promise<Json> => (await fetch(`${service.url}/api/index/status`, { headers: AUTH_HEADER })).json();
  /** An object event (as the store sends on a write), then the round it triggers. */
  const syncNow = async () => {
    const before = (await indexStatus()).source.lastSync?.finishedAt;
    await deliver!({ id: `e-${Date.now()}`, type: 'object.created', payload: { bucket: BUCKET, key: 'acl/private.png' } });
    return until(async () =>
      ((s: Json) => (s.source.lastSync && s.source.lastSync.finishedAt !== before && !s.source.syncing ? s : undefined))(await indexStatus()),
    );
  };
  const search = async (headers: Record<string, string>): Promise<Json> => {
    const response = await fetch(`${service.url}/search`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'red', topk: 50 }),
    });
    expect(response.status).to.equal(200);
    return (await response.json()).results;
  };
  const keysSeenBy = async (headers: Record<string, string>, prefix: string) =>
    (await search(headers))
      .map((r: Json) => r.source?.key)
      .filter((k: string | undefined) => k?.startsWith(prefix))
      .sort();

  before(async () => {
    platform = await startTestPlatform();
    alice = await createTenant(platform.endpoint, 'iskeys-alice');
    await createTenant(platform.endpoint, 'iskeys-bob');
    await createTenant(platform.endpoint, 'iskeys-carol');
    // ACLs are off in a new bucket (BucketOwnerEnforced, as on S3): ObjectWriter turns them on.
    await alice.s3.send(new CreateBucketCommand({ Bucket: BUCKET, ObjectOwnership: 'ObjectWriter' }));
    let seed = 1;
    for (const key of ADVERSARIAL)
      await alice.s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: await colourImage(PALETTE.red, seed++, 64, 48) }));
    for (const [key, acl] of Object.entries(ACL_KEYS))
      await alice.s3.send(
        new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: await colourImage(PALETTE.red, seed++, 64, 48), ACL: acl.acl, GrantRead: acl.grantRead }),
      );
    const d = { modelDir: makeTestModel(), imageDir: tempDir('iskeys-images'), indexDir: tempDir('iskeys-index') };
    dirs.push(...Object.values(d));
    const broker: ObjectEventSource = {
      subscribe: async (_queue, handler) => {
        deliver = handler;
        return { close: async () => undefined };
      },
    };
    service = await startImageSearch({
      env: {
        PORT: '0',
        IMAGE_FILE_DIR: d.imageDir,
        IMAGE_SEARCH_MODEL_DIR: d.modelDir,
        IMAGE_SEARCH_INDEX_DIR: d.indexDir,
        IMAGE_SEARCH_SOURCE_S3_URL: `s3://${BUCKET}/`,
        IMAGE_SEARCH_SOURCE_SYNC_SECONDS: '0',
        // Every round reads every ACL here: these tests ask what the ACLs mean, not when they are read (acl-refresh.test.ts).
        IMAGE_SEARCH_ACL_REFRESH_S: '0',
        IMAGE_SEARCH_S3_ENDPOINT: platform.endpoint,
        IMAGE_SEARCH_S3_ACCESS_KEY_ID: alice.accessKey,
        IMAGE_SEARCH_S3_SECRET_ACCESS_KEY: alice.secretKey,
        IMAGE_SEARCH_API_KEY: TEST_API_KEY,
        STRATA_JWT_SECRET: JWT_SECRET,
      },
      objectEvents: broker,
      host: '127.0.0.1',
      logger: pino({ level: 'silent' }),
    });
    await until(async () => ((s: Json) => (s.source.lastSync && !s.source.syncing ? true : undefined))(await indexStatus()));
    as = {
      alice: bearer(await login(platform.endpoint, 'iskeys-alice', alice.password)),
      bob: bearer(await login(platform.endpoint, 'iskeys-bob', 'iskeys-bob-password-1')),
      carol: bearer(await login(platform.endpoint, 'iskeys-carol', 'iskeys-carol-password-1')),
      anonymous: {},
    };
  });
  after(async () => {
    await service?.stop();
    await platform?.destroy();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  // First: the tests below change ACLs. The gateway names the bucket's owner alike in ListBuckets and in
  // an ACL, so an image whose ACL grants no one else costs no request once its ACL is known.
  it('reads, at a round after the first, only the ACLs that grant beyond the bucket’s owner (the default schedule)', async () => {
    const dir = tempDir('iskeys-acl-rounds');
    dirs.push(dir);
    const source = new BucketSource({
      location: { endpoint: platform.endpoint, url: `s3://${BUCKET}/`, region: 'us-east-1', accessKeyId: alice.accessKey, secretAccessKey: alice.secretKey },
      files: new ImageFiles(dir),
      service: standInIndex(),
      logger: pino({ level: 'silent' }),
    });
    const all = ADVERSARIAL.length + Object.keys(ACL_KEYS).length;
    expect((await source.sync()).aclReads).to.equal(all);
    expect((await source.sync()).aclReads).to.equal(3); // public, authenticated, granted
  });

  it('gives every bucket result its bucket and key (unicode, spaces, x.jpg beside x.jpg/inner.jpg, very long keys)', async () => {
    const results = (await search(AUTH_HEADER)).filter((r: Json) => r.source?.key.startsWith('cams/'));
    expect(results.map((r: Json) => r.source.key).sort()).to.deep.equal([...ADVERSARIAL].sort());
    for (const r of results) {
      expect(r.source.bucket).to.equal(BUCKET);
      expect(r.path).to.match(new RegExp(`^s3/${BUCKET}/[0-9a-f]{40}\\.(jpg|png)$`));
    }
  });

  it('shows a bucket image to whom the gateway lets GET it: owner, READ grantee, any login under authenticated-read, anyone under public-read', async () => {
    const all = Object.keys(ACL_KEYS).sort();
    expect(await keysSeenBy(as.alice, 'acl/')).to.deep.equal(all);
    expect(await keysSeenBy(as.bob, 'acl/')).to.deep.equal(['acl/authenticated.png', 'acl/granted.png', 'acl/public.png']);
    expect(await keysSeenBy(as.carol, 'acl/')).to.deep.equal(['acl/authenticated.png', 'acl/public.png']);
    expect(await keysSeenBy(as.anonymous, 'acl/')).to.deep.equal(['acl/public.png']);
    // The bytes follow the same rule: an anonymous <img> of the public object, and a signed URL for bob's grant.
    const anonymous = (await search(as.anonymous)).find((r: Json) => r.source?.key === 'acl/public.png');
    expect((await fetch(service.url + anonymous.url)).status).to.equal(200);
    const granted = (await search(as.bob)).find((r: Json) => r.source?.key === 'acl/granted.png');
    expect((await fetch(service.url + granted.url)).status).to.equal(200);
    const privatePath = (await search(as.alice)).find((r: Json) => r.source?.key === 'acl/private.png').path;
    expect((await fetch(`${service.url}/images/${privatePath}`, { headers: as.carol })).status).to.equal(403);
  });

  it('sees an ACL changed at the store at the next round that reads every ACL (the ETag does not change)', async () => {
    await alice.s3.send(new PutObjectAclCommand({ Bucket: BUCKET, Key: 'acl/public.png', ACL: 'private' }));
    await alice.s3.send(new PutObjectAclCommand({ Bucket: BUCKET, Key: 'acl/private.png', GrantRead: 'id="iskeys-carol"' }));
    await syncNow();
    expect(await keysSeenBy(as.anonymous, 'acl/')).to.deep.equal([]);
    expect(await keysSeenBy(as.carol, 'acl/')).to.deep.equal(['acl/authenticated.png', 'acl/private.png']);
    expect(await keysSeenBy(as.bob, 'acl/')).to.deep.equal(['acl/authenticated.png', 'acl/granted.png']);
  });

  it('ignores public grants where the bucket’s public access block does (IgnorePublicAcls), as the gateway', async () => {
    await alice.s3.send(new PutObjectAclCommand({ Bucket: BUCKET, Key: 'acl/public.png', ACL: 'public-read' }));
    await syncNow();
    expect(await keysSeenBy(as.anonymous, 'acl/')).to.deep.equal(['acl/public.png']);
    await alice.s3.send(new PutPublicAccessBlockCommand({ Bucket: BUCKET, PublicAccessBlockConfiguration: { IgnorePublicAcls: true } }));
    expect((await fetch(`${platform.endpoint}/${BUCKET}/acl/public.png`)).status).to.equal(403);
    await syncNow();
    expect(await keysSeenBy(as.anonymous, 'acl/')).to.deep.equal([]);
    // AuthenticatedUsers is a public grant too; a grant to a user stays.
    expect(await keysSeenBy(as.carol, 'acl/')).to.deep.equal(['acl/private.png']);
  });

  for (const viewport of [
    { width: 1366, height: 900 },
    { width: 390, height: 844 },
  ])
    it(`labels results bucket/key on the page, as text (Chromium, ${viewport.width}×${viewport.height})`, async () => {
      const profile = tempDir('iskeys-chromium');
      dirs.push(profile);
      const browser = await launchChromium(profile, { viewport });
      try {
        const page = await browser.newPage();
        await page.goto(service.url + '/');
        await page.fill('#token', TEST_API_KEY);
        await page.press('#token', 'Tab');
        await page.fill('#query', 'red');
        await page.press('#query', 'Enter');
        await page.waitForFunction(() => document.querySelectorAll('#results .card').length >= 8);
        const labels = await page.$$eval('#results .card .label', (els) => els.map((e) => e.textContent ?? ''));
        for (const key of ADVERSARIAL)
          expect(
            labels.some((l) => l.endsWith(` ${BUCKET}/${key}`)),
            key,
          ).to.equal(true);
        expect(labels.some((l) => l.includes('s3/'))).to.equal(false);
        // The key's markup stays text: no element was made of it.
        expect(await page.$$eval('#results b', (els) => els.length)).to.equal(0);
        // The longest key neither widens the page nor makes its card taller than three lines of label.
        expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).to.equal(true);
        const tallest = await page.$$eval('#results .card .label', (els) => Math.max(...els.map((e) => e.getBoundingClientRect().height)));
        expect(tallest).to.be.below(60);
        const cards = await page.$$('#results .card');
        await cards[labels.findIndex((l) => l.includes('<b>bold</b>'))].click();
        expect(await page.textContent('#detail-title')).to.equal(`${BUCKET}/${ADVERSARIAL[2]}`);
      } finally {
        await browser.close();
      }
    });
});
