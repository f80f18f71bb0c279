import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { MIRROR_RECORD, mirrorPathOf, REMOVED_BY_ADMIN } from '../../images/image-search/src/bucket-source.js';
import type { ObjectEventSource, ObjectStoreEvent } from '../../images/image-search/src/object-events.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { launchChromium } from '../support/chromium.js';
import { AUTH_HEADER, colourImage, makeTestModel, PALETTE, tempDir, TEST_API_KEY } from './support/fixtures.js';
import { bucketSourceEnv, startS3rver, until, type TestS3 } from './support/s3rver.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** A service following s3://photos/<prefix>, with object events delivered by the test. */
async function follow(s3: TestS3, prefix: string, dirs: { modelDir: string; imageDir: string; indexDir: string }, env: NodeJS.ProcessEnv = {}) {
  let deliver: ((event: ObjectStoreEvent) => Promise<void>) | undefined;
  const broker: ObjectEventSource = {
    subscribe: async (_queue, handler) => {
      deliver = handler;
      return { close: async () => undefined };
    },
  };
  const service: RunningService = await startImageSearch({
    env: { ...bucketSourceEnv(s3, `s3://photos/${prefix}`, dirs), ...env },
    objectEvents: broker,
    host: '127.0.0.1',
    logger: pino({ level: 'silent' }),
  });
  const indexStatus = async (headers: Record<string, string> = AUTH_HEADER): Promise<Json> =>
    (await fetch(`${service.url}/api/index/status`, { headers })).json();
  const synced = (after?: string): Promise<Json> =>
    until(async () => ((s: Json) => (s.source.lastSync && s.source.lastSync.finishedAt !== after && !s.source.syncing ? s : undefined))(await indexStatus()));
  /** An object event about `key`, then the round it triggers. */
  const syncAfterEvent = async (key: string): Promise<Json> => {
    const before = (await indexStatus()).source.lastSync?.finishedAt;
    await deliver!({ id: `e-${key}-${Date.now()}`, type: 'object.created', payload: { bucket: 'photos', key } });
    return synced(before);
  };
  const paths = async (): Promise<string[]> =>
    (
      await (
        await fetch(`${service.url}/search`, {
          method: 'POST',
          headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
          body: JSON.stringify({ query: 'red', topk: 20 }),
        })
      ).json()
    ).results.map((r: { path: string }) => r.path);
  return { service, indexStatus, synced, syncAfterEvent, paths };
}

describe('image-search: bucket following holds every legal key and reports what it skips', function () {
  this.timeout(120_000);
  let s3: TestS3;
  const dirs: string[] = [];
  const fresh = () => {
    const d = { modelDir: makeTestModel(), imageDir: tempDir('keys-images'), indexDir: tempDir('keys-index') };
    dirs.push(...Object.values(d));
    return d;
  };
  before(async () => {
    s3 = await startS3rver(['photos']);
  });
  after(async () => {
    await s3?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('mirrors x.jpg next to x.jpg/inner.jpg, reports unsupported objects, keeps a removed image out until it changes', async () => {
    await s3.put('photos', 'keys/x.jpg', await colourImage(PALETTE.red, 1));
    await s3.put('photos', 'keys/x.jpg/inner.jpg', await colourImage(PALETTE.blue, 2));
    await s3.put('photos', 'keys/photo.heic', 'a format this service does not read');
    await s3.put('photos', 'keys/README', 'no extension');
    const running = await follow(s3, 'keys', fresh());
    try {
      const first = await running.synced();
      expect(first.source.lastError).to.equal(null);
      expect(first.source.lagSeconds).to.be.a('number');
      expect(first.source.lastSync).to.deep.include({ listed: 4, downloaded: 2, added: 2 });
      expect(first.totalVectors).to.equal(2);
      const reasons = Object.fromEntries(first.source.lastSync.skipped.map((s: { key: string; reason: string }) => [s.key, s.reason]));
      expect(Object.keys(reasons).sort()).to.deep.equal(['keys/README', 'keys/photo.heic']);
      expect(reasons['keys/photo.heic']).to.match(/^HEIC \(\.heic\) is not decodable by this build of sharp \(it reads \.jpg .*\.avif\)/);
      expect(reasons['keys/README']).to.match(/^no file extension: not taken for an image/);
      expect((await running.paths()).sort()).to.deep.equal([mirrorPathOf('photos', 'keys/x.jpg'), mirrorPathOf('photos', 'keys/x.jpg/inner.jpg')].sort());
      // The source's state names object keys: admins only.
      expect(await running.indexStatus({})).to.not.have.property('source');

      // Removed by an admin: it stays out at the next rounds, reported as such, until its object changes.
      const [hit] = (await running.paths()).filter((p) => p === mirrorPathOf('photos', 'keys/x.jpg'));
      const id = (
        await (
          await fetch(`${running.service.url}/search`, {
            method: 'POST',
            headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
            body: JSON.stringify({ query: 'red', topk: 20 }),
          })
        ).json()
      ).results.find((r: { path: string }) => r.path === hit).id;
      const removed = await fetch(`${running.service.url}/api/index/remove`, {
        method: 'POST',
        headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
        body: JSON.stringify({ image_ids: [id] }),
      });
      expect(removed.status).to.equal(200);
      const after = await running.syncAfterEvent('keys/x.jpg');
      expect(after.source.lastSync).to.deep.include({ downloaded: 0, added: 0 });
      expect(after.totalVectors).to.equal(1);
      expect(after.source.lastSync.skipped).to.deep.include({ key: 'keys/x.jpg', reason: REMOVED_BY_ADMIN });
      await s3.put('photos', 'keys/x.jpg', await colourImage(PALETTE.red, 3));
      const changed = await running.syncAfterEvent('keys/x.jpg');
      expect(changed.source.lastSync).to.deep.include({ downloaded: 1, added: 1 });
      expect(changed.totalVectors).to.equal(2);

      // Deleting one of the two leaves the other, and rounds go on.
      await s3.remove('photos', 'keys/x.jpg/inner.jpg');
      const deleted = await running.syncAfterEvent('keys/x.jpg/inner.jpg');
      expect(deleted.source).to.deep.include({ lastError: null });
      expect(deleted.source.lastSync).to.deep.include({ removed: 1 });
      expect(await running.paths()).to.deep.equal([mirrorPathOf('photos', 'keys/x.jpg')]);
    } finally {
      await running.service.stop();
    }
  });

  it('commits what a round finished when one object cannot be mirrored, reports it, and recovers once it can', async () => {
    const d = fresh();
    await s3.put('photos', 'part/red.png', await colourImage(PALETTE.red, 6));
    await s3.put('photos', 'part/blue.png', await colourImage(PALETTE.blue, 7));
    // Something in the way of one object's mirror file (a folder with a file in it): its download cannot land.
    const blocked = path.join(d.imageDir, mirrorPathOf('photos', 'part/blue.png'));
    mkdirSync(blocked, { recursive: true });
    writeFileSync(path.join(blocked, 'in-the-way'), 'x');
    const running = await follow(s3, 'part', d);
    try {
      const first = await running.synced();
      expect(first.source.lastError).to.equal(null);
      expect(first.source.lastSync).to.deep.include({ downloaded: 1, added: 1 });
      expect(first.source.lastSync.skipped.map((s: { key: string }) => s.key)).to.deep.equal(['part/blue.png']);
      expect(first.source.lastSync.skipped[0].reason).to.match(/^not fetched \(tried again next round\): /);
      // The finished part is committed: the next round fetches nothing again.
      const record = JSON.parse(readFileSync(path.join(d.imageDir, 's3/photos', MIRROR_RECORD), 'utf8'));
      expect(Object.keys(record.paths)).to.deep.equal([mirrorPathOf('photos', 'part/red.png')]);
      rmSync(blocked, { recursive: true });
      const recovered = await running.syncAfterEvent('part/blue.png');
      expect(recovered.source.lastSync).to.deep.include({ downloaded: 1, added: 1, skipped: [] });
      expect(recovered.totalVectors).to.equal(2);
    } finally {
      await running.service.stop();
    }
  });

  it('moves a mirror of the earlier layout (s3/<bucket>/<key>) to the hashed one at start, without fetching again', async () => {
    const d = fresh();
    const red = await colourImage(PALETTE.red, 4);
    await s3.put('photos', 'old/a/b.png', red);
    // What an earlier version left: the object at its key, with the record naming it there.
    const oldPath = 's3/photos/old/a/b.png';
    mkdirSync(path.dirname(path.join(d.imageDir, oldPath)), { recursive: true });
    writeFileSync(path.join(d.imageDir, oldPath), red);
    const etag = (await fetch(`${s3.endpoint}/photos/old/a/b.png`, { method: 'HEAD' })).headers.get('etag')!.replace(/"/g, '');
    writeFileSync(
      path.join(d.imageDir, 's3/photos', MIRROR_RECORD),
      JSON.stringify({ url: 's3://photos/old', paths: { [oldPath]: { key: 'old/a/b.png', etag, size: red.length } } }),
    );
    const running = await follow(s3, 'old', d);
    try {
      const first = await running.synced();
      expect(first.source.lastSync).to.deep.include({ downloaded: 0, added: 1 });
      const moved = mirrorPathOf('photos', 'old/a/b.png');
      expect(await running.paths()).to.deep.equal([moved]);
      expect(readFileSync(path.join(d.imageDir, moved)).equals(red)).to.equal(true);
      expect(existsSync(path.join(d.imageDir, 's3/photos/old'))).to.equal(false);
      const record = JSON.parse(readFileSync(path.join(d.imageDir, 's3/photos', MIRROR_RECORD), 'utf8'));
      expect(Object.keys(record.paths)).to.deep.equal([moved]);
    } finally {
      await running.service.stop();
    }
  });

  it("shows an admin the source's skipped objects and its last error on the page", async () => {
    await s3.put('photos', 'page/red.png', await colourImage(PALETTE.red, 5));
    await s3.put('photos', 'page/photo.bmp', 'a format this service does not read');
    const working = await follow(s3, 'page', fresh());
    const refused = await follow(s3, 'page', fresh(), { IMAGE_SEARCH_S3_ACCESS_KEY_ID: 'WRONG' });
    const profile = tempDir('keys-chromium');
    dirs.push(profile);
    const browser = await launchChromium(profile, { viewport: { width: 1366, height: 900 } });
    try {
      await working.synced();
      await until(async () => ((await refused.indexStatus()).source.lastError ? true : undefined));
      const indexPanel = async (url: string) => {
        const page = await browser.newPage();
        await page.goto(url + '/');
        await page.fill('#token', TEST_API_KEY);
        await page.press('#token', 'Tab');
        await page.waitForFunction(() => document.querySelector('#index-status')?.textContent?.includes('last sync'));
        const text = (await page.textContent('#index-status')) ?? '';
        await page.close();
        return text;
      };
      const shown = await indexPanel(working.service.url);
      expect(shown).to.match(/skipped1 object\(s\)/);
      expect(shown).to.include('page/photo.bmp: .bmp is not an image format this service decodes (it reads .jpg');
      expect(shown).to.not.include('sync error');
      const failing = await indexPanel(refused.service.url);
      expect(failing).to.match(/last syncnot yet/);
      expect(failing).to.match(/sync errorGET \/photos from the object store answered 403 InvalidAccessKeyId/);
    } finally {
      await browser.close();
      await working.service.stop();
      await refused.service.stop();
    }
  });
});
