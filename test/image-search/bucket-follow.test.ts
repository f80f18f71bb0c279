import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import sharp from 'sharp';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { mirrorPathOf } from '../../images/image-search/src/bucket-source.js';
import type { ObjectEventSource, ObjectStoreEvent } from '../../images/image-search/src/object-events.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { AUTH_HEADER, colourImage, makeTestModel, PALETTE, tempDir } from './support/fixtures.js';
import { bucketSourceEnv, startS3rver, until, type TestS3 } from './support/s3rver.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** Uncompressed PNGs: every colour gives a file of the same size, so only the content (ETag) tells them apart. */
const samesizeImage = async (colour: keyof typeof PALETTE, seed: number) =>
  sharp(await colourImage(PALETTE[colour], seed))
    .png({ compressionLevel: 0, adaptiveFiltering: false })
    .toBuffer();

describe('image-search: the index follows its bucket exactly (content changes, deletes, undecodable objects)', function () {
  this.timeout(120_000);
  let s3: TestS3;
  const dirs: string[] = [];
  before(async () => {
    s3 = await startS3rver(['photos']);
  });
  after(async () => {
    await s3?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('re-vectorises an overwritten object (same size, new ETag) and drops its old vector, across restarts too; leaves local files alone', async () => {
    const [modelDir, imageDir, indexDir] = [makeTestModel(), tempDir('follow-images'), tempDir('follow-index')];
    dirs.push(modelDir, imageDir, indexDir);
    const red = await samesizeImage('red', 1);
    const blue = await samesizeImage('blue', 2);
    expect(blue.length).to.equal(red.length);
    await s3.put('photos', 'follow/a.png', red);
    await s3.put('photos', 'follow/broken.png', 'this is not an image');
    // A local file where an earlier version mirrored follow/a.png (key minus prefix): never touched.
    const local = await colourImage(PALETTE.green, 3);
    writeFileSync(path.join(imageDir, 'a.png'), local);

    let deliver: ((event: ObjectStoreEvent) => Promise<void>) | undefined;
    const broker: ObjectEventSource = {
      subscribe: async (_queue, handler) => {
        deliver = handler;
        return { close: async () => undefined };
      },
    };
    const env = bucketSourceEnv(s3, 's3://photos/follow', { modelDir, imageDir, indexDir });
    let service: RunningService = await startImageSearch({ env, objectEvents: broker, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
    const status = (): Promise<Json> => fetch(`${service.url}/api/status`, { headers: AUTH_HEADER }).then((r) => r.json());
    const firstSync = () => until(async () => ((s: Json) => (s.source.lastSync && !s.source.syncing ? s : undefined))(await status()));
    /** An object event, then the round it triggers. */
    const syncAfterEvent = async (key: string) => {
      const before = (await status()).source.lastSync?.finishedAt;
      await deliver!({ id: `e-${key}-${Date.now()}`, type: 'object.created', payload: { bucket: 'photos', key } });
      return until(async () => ((s: Json) => (s.source.lastSync.finishedAt !== before && !s.source.syncing ? s : undefined))(await status()));
    };
    const search = async (query: string): Promise<Array<{ id: number; path: string }>> =>
      (
        await (
          await fetch(`${service.url}/search`, {
            method: 'POST',
            headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
            body: JSON.stringify({ query, topk: 10 }),
          })
        ).json()
      ).results;
    const mirrored = mirrorPathOf('photos', 'follow/a.png');
    try {
      const first = await firstSync();
      expect(first.source.mirror).to.equal('s3/photos');
      expect(first.source.lastSync).to.deep.include({ listed: 2, downloaded: 2, added: 1, replaced: 0 });
      expect(first.source.lastSync.skipped).to.have.length(1);
      expect(first.source.lastSync.skipped[0].key).to.equal('follow/broken.png');
      expect(first.source.lastSync.skipped[0].reason).to.match(/not a decodable image/);
      expect(readFileSync(path.join(imageDir, mirrored)).equals(red)).to.equal(true);
      expect(readFileSync(path.join(imageDir, 'a.png')).equals(local)).to.equal(true);
      const [redHit] = (await search('red')).filter((r) => r.path === mirrored);
      expect(redHit).to.not.equal(undefined);

      // Overwritten with content of the same size: fetched again, new vector in, old vector out.
      await s3.put('photos', 'follow/a.png', blue);
      const overwritten = await syncAfterEvent('follow/a.png');
      expect(overwritten.source.lastSync).to.deep.include({ downloaded: 1, encoded: 1, added: 0, replaced: 1, removed: 0 });
      expect(overwritten.index.totalVectors).to.equal(1);
      const blueResults = await search('blue');
      expect(blueResults.filter((r) => r.path === mirrored)).to.have.length(1);
      expect(blueResults[0].path).to.equal(mirrored);
      expect(blueResults[0].id).to.not.equal(redHit.id);
      const old = await fetch(`${service.url}/api/tools/call`, {
        method: 'POST',
        headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
        body: JSON.stringify({ tool: 'search_by_image_id', arguments: { image_id: redHit.id } }),
      });
      expect(old.status).to.equal(404);

      // Nothing changed: nothing fetched, nothing encoded; the undecodable object stays skipped, untouched.
      const quiet = await syncAfterEvent('follow/broken.png');
      expect(quiet.source.lastSync).to.deep.include({ downloaded: 0, encoded: 0, added: 0, replaced: 0 });
      expect(quiet.source.lastSync.skipped.map((s: { key: string }) => s.key)).to.deep.equal(['follow/broken.png']);

      // Overwritten while the service is down: the recorded ETag tells at the first round.
      await service.stop();
      await s3.put('photos', 'follow/a.png', red);
      service = await startImageSearch({ env, objectEvents: broker, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
      const restarted = await firstSync();
      expect(restarted.source.lastSync).to.deep.include({ downloaded: 1, encoded: 1, replaced: 1, added: 0 });
      expect(restarted.source.lastSync.skipped.map((s: { key: string }) => s.key)).to.deep.equal(['follow/broken.png']);
      const redAgain = (await search('red')).filter((r) => r.path === mirrored);
      expect(redAgain).to.have.length(1);
      expect(redAgain[0].id).to.not.equal(redHit.id);
      expect((await search('blue')).filter((r) => r.path === mirrored)).to.have.length(1);

      // The undecodable object is looked at again once it changes.
      await s3.put('photos', 'follow/broken.png', await samesizeImage('yellow', 4));
      const fixed = await syncAfterEvent('follow/broken.png');
      expect(fixed.source.lastSync).to.deep.include({ downloaded: 1, added: 1 });
      expect(fixed.source.lastSync.skipped).to.deep.equal([]);
      expect((await search('yellow'))[0].path).to.equal(mirrorPathOf('photos', 'follow/broken.png'));

      // A delete removes the vector and the mirrored file, and nothing else.
      await s3.remove('photos', 'follow/a.png');
      const deleted = await syncAfterEvent('follow/a.png');
      expect(deleted.source.lastSync).to.deep.include({ removed: 1 });
      expect(deleted.index.totalVectors).to.equal(1);
      expect((await search('red')).map((r) => r.path)).to.not.include(mirrored);
      expect(existsSync(path.join(imageDir, mirrored))).to.equal(false);
      expect(readFileSync(path.join(imageDir, 'a.png')).equals(local)).to.equal(true);
    } finally {
      await service.stop();
    }
  });

  it('re-indexes mirrored images that the index lost (a fresh index directory) without fetching them again', async () => {
    const [modelDir, imageDir, indexDir] = [makeTestModel(), tempDir('follow-images'), tempDir('follow-index')];
    dirs.push(modelDir, imageDir, indexDir);
    await s3.put('photos', 'lost/b.png', await samesizeImage('green', 5));
    const env = bucketSourceEnv(s3, 's3://photos/lost', { modelDir, imageDir, indexDir });
    const start = () => startImageSearch({ env, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
    const synced = async (service: RunningService): Promise<Json> =>
      until(async () =>
        ((s: Json) => (s.source.lastSync && !s.source.syncing ? s : undefined))(
          await (await fetch(`${service.url}/api/status`, { headers: AUTH_HEADER })).json(),
        ),
      );
    let service = await start();
    expect((await synced(service)).source.lastSync).to.deep.include({ downloaded: 1, added: 1 });
    await service.stop();
    rmSync(indexDir, { recursive: true, force: true });
    mkdirSync(indexDir);
    service = await start();
    try {
      const again = await synced(service);
      expect(again.source.lastSync).to.deep.include({ downloaded: 0, encoded: 1, added: 1 });
      expect(again.index.totalVectors).to.equal(1);
    } finally {
      await service.stop();
    }
  });
});
