import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { JWT_SECRET, startTestPlatform, type TestPlatform } from '../e2e/support/platform.js';
import { bearer, createTenant, login, type Tenant } from '../e2e/support/s3.js';
import { AUTH_HEADER, colourImage, makeTestModel, PALETTE, tempDir, TEST_API_KEY } from './support/fixtures.js';
import { until } from './support/s3rver.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

// An index worker that follows a bucket of Strata's own object store with a scoped read-only key (what
// the operator gives it, issue 38) instead of its owner's keys: the listing, the downloads, the ACL reads
// and the owner it learns from ListBuckets all work, and a caller sees the images the gateway would let
// them GET, as with the owner's own keys.
const BUCKET = 'scoped-source-photos';

describe('image-search: a bucket source read with a scoped read-only key', function () {
  this.timeout(180_000);
  let platform: TestPlatform;
  let alice: Tenant;
  let service: RunningService;
  const dirs: string[] = [];

  const indexStatus = async (): Promise<Json> => (await fetch(`${service.url}/api/index/status`, { headers: AUTH_HEADER })).json();
  const keysSeenBy = async (headers: Record<string, string>): Promise<string[]> => {
    const response = await fetch(`${service.url}/search`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'red', topk: 50 }),
    });
    expect(response.status).to.equal(200);
    return ((await response.json()).results as Json[]).map((r) => r.source?.key).sort();
  };

  before(async () => {
    platform = await startTestPlatform();
    alice = await createTenant(platform.endpoint, 'scoped-src-alice');
    await createTenant(platform.endpoint, 'scoped-src-bob');
    // ACLs on, one public image: the source must read ACLs (and the public access block) to show it to anyone.
    await alice.s3.send(new CreateBucketCommand({ Bucket: BUCKET, ObjectOwnership: 'ObjectWriter' }));
    let seed = 1;
    for (const key of ['photos/a.png', 'photos/b.png', 'private/c.png'])
      await alice.s3.send(
        new PutObjectCommand({
          Bucket: BUCKET,
          Key: key,
          Body: await colourImage(PALETTE.red, seed++, 64, 48),
          ...(key === 'photos/b.png' ? { ACL: 'public-read' as const } : {}),
        }),
      );
    const made = await fetch(`${platform.endpoint}/admin/access-keys`, {
      method: 'POST',
      headers: { ...bearer(await login(platform.endpoint, 'scoped-src-alice', alice.password)), 'content-type': 'application/json' },
      body: JSON.stringify({ buckets: [BUCKET], prefix: 'photos/' }),
    });
    expect(made.status).to.equal(201);
    const key = ((await made.json()) as { data: { accessKey: string; secretKey: string } }).data;
    const d = { modelDir: makeTestModel(), imageDir: tempDir('scoped-src-images'), indexDir: tempDir('scoped-src-index') };
    dirs.push(...Object.values(d));
    service = await startImageSearch({
      env: {
        PORT: '0',
        IMAGE_FILE_DIR: d.imageDir,
        IMAGE_SEARCH_MODEL_DIR: d.modelDir,
        IMAGE_SEARCH_INDEX_DIR: d.indexDir,
        IMAGE_SEARCH_SOURCE_S3_URL: `s3://${BUCKET}/photos/`,
        IMAGE_SEARCH_SOURCE_SYNC_SECONDS: '0',
        IMAGE_SEARCH_S3_ENDPOINT: platform.endpoint,
        IMAGE_SEARCH_S3_ACCESS_KEY_ID: key.accessKey,
        IMAGE_SEARCH_S3_SECRET_ACCESS_KEY: key.secretKey,
        IMAGE_SEARCH_API_KEY: TEST_API_KEY,
        STRATA_JWT_SECRET: JWT_SECRET,
      },
      host: '127.0.0.1',
      logger: pino({ level: 'silent' }),
    });
    await until(async () => ((s: Json) => (s.source.lastSync && !s.source.syncing ? true : undefined))(await indexStatus()));
  });
  after(async () => {
    await service?.stop();
    await platform?.destroy();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('mirrors and indexes the prefix, and learns the bucket’s owner (ListBuckets)', async () => {
    const source = (await indexStatus()).source;
    expect(source.owner).to.equal('scoped-src-alice');
    expect(source.lastSync).to.include({ listed: 2, added: 2 });
    expect(source.lastSync.skipped).to.deep.equal([]);
  });

  it('shows the images to whom the gateway lets GET them: the owner all, another user and anonymous the public one', async () => {
    expect(await keysSeenBy(bearer(await login(platform.endpoint, 'scoped-src-alice', alice.password)))).to.deep.equal(['photos/a.png', 'photos/b.png']);
    expect(await keysSeenBy(bearer(await login(platform.endpoint, 'scoped-src-bob', 'scoped-src-bob-password-1')))).to.deep.equal(['photos/b.png']);
    expect(await keysSeenBy({})).to.deep.equal(['photos/b.png']);
  });
});
