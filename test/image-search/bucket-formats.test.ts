import { expect } from 'chai';
import { mkdirSync, rmSync } from 'node:fs';
import { pino } from 'pino';
import sharp from 'sharp';
import { startImageSearch } from '../../images/image-search/src/app.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { launchChromium } from '../support/chromium.js';
import { layoutProblems } from '../support/page-layout.js';
import { AUTH_HEADER, colourImage, makeTestModel, PALETTE, tempDir, TEST_API_KEY } from './support/fixtures.js';
import { largeTiff } from './support/large-images.js';
import { bucketSourceEnv, startS3rver, until, type TestS3 } from './support/s3rver.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/**
 * A bucket as a photo library has it: two 19 MB TIFF scans, an AVIF, a PNG and a JPEG (indexed), and
 * what cannot be (HEIC where sharp's build has no HEVC decoder, BMP, no extension, bytes that do not decode).
 */
describe('image-search: a bucket of large and unusual formats (thumbnails in the grid, TIFF shown, the rest skipped with reasons)', function () {
  this.timeout(300_000);
  let s3: TestS3;
  let service: RunningService;
  const dirs: string[] = [];
  let originalBytes = 0;
  /** What the page calls it: bucket/key, not the mirror's hashed path. */
  const scanRedLabel = 'photos/lib/scan-red.tif';

  before(async () => {
    s3 = await startS3rver(['photos']);
    const objects: Array<[string, Buffer | string]> = [
      ['lib/scan-red.tif', await largeTiff(PALETTE.red, 21)],
      ['lib/scan-blue.tif', await largeTiff(PALETTE.blue, 22)],
      [
        'lib/photo.avif',
        await sharp(await colourImage(PALETTE.red, 23))
          .avif()
          .toBuffer(),
      ],
      ['lib/green.png', await colourImage(PALETTE.green, 24)],
      [
        'lib/yellow.jpg',
        await sharp(await colourImage(PALETTE.yellow, 25))
          .jpeg()
          .toBuffer(),
      ],
      ['lib/phone.heic', 'stands for a HEIC photo'],
      ['lib/old.bmp', 'stands for a BMP'],
      ['lib/NOTES', 'no extension'],
      ['lib/broken.png', 'not a PNG at all'],
    ];
    for (const [key, body] of objects) {
      await s3.put('photos', key, body);
      if (/\.(tif|avif|png|jpg)$/.test(key) && key !== 'lib/broken.png') originalBytes += body.length;
    }
    const d = { modelDir: makeTestModel(), imageDir: tempDir('formats-images'), indexDir: tempDir('formats-index') };
    dirs.push(...Object.values(d));
    service = await startImageSearch({ env: bucketSourceEnv(s3, 's3://photos/lib', d), host: '127.0.0.1', logger: pino({ level: 'silent' }) });
  });
  after(async () => {
    await service?.stop();
    await s3?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('indexes what sharp decodes (TIFF, AVIF, PNG, JPEG) and lists the rest as skipped with the reason', async () => {
    const status: Json = await until(async () => {
      const s = (await (await fetch(`${service.url}/api/index/status`, { headers: AUTH_HEADER })).json()) as Json;
      return s.source.lastSync && !s.source.syncing ? s : undefined;
    });
    expect(status.source.lastError).to.equal(null);
    expect(status.totalVectors).to.equal(5);
    expect(status.source.lastSync).to.deep.include({ listed: 9, added: 5 });
    const reasons = Object.fromEntries(status.source.lastSync.skipped.map((s: Json) => [s.key, s.reason]));
    expect(Object.keys(reasons).sort()).to.deep.equal(['lib/NOTES', 'lib/broken.png', 'lib/old.bmp', 'lib/phone.heic']);
    expect(reasons['lib/phone.heic']).to.match(/^HEIC \(\.heic\) is not decodable by this build of sharp/);
    expect(reasons['lib/old.bmp']).to.match(/^\.bmp is not an image format this service decodes/);
    expect(reasons['lib/NOTES']).to.match(/^no file extension/);
    expect(reasons['lib/broken.png']).to.match(/^not a decodable image: /);
  });

  for (const viewport of [
    { width: 1366, height: 900, deviceScaleFactor: 1 },
    { width: 390, height: 844, deviceScaleFactor: 2 },
  ]) {
    it(`at ${viewport.width}×${viewport.height}: the grid shows thumbnails (the TIFF too) for under 2 MB, the TIFF opens converted`, async () => {
      const profile = tempDir('formats-chromium');
      dirs.push(profile);
      const { deviceScaleFactor, ...size } = viewport;
      const browser = await launchChromium(profile, { viewport: size, deviceScaleFactor });
      try {
        const page = await browser.newPage();
        await page.goto(service.url + '/');
        await page.fill('#token', TEST_API_KEY);
        await page.dispatchEvent('#token', 'change');
        // The page says where a token comes from: the gateway's POST /login and its body.
        const help = (await page.textContent('#token-help')) ?? '';
        expect(help).to.include('data.token');
        expect(help).to.match(/POST .*\/login\s+Content-Type: application\/json\s+\{"username": "…", "password": "…"\}/);
        // The grid is measured on the page's first search: a later search within the same second would
        // reuse the same signed thumbnail URLs from the browser's cache and receive no bytes at all.
        await page.fill('#query', 'red');
        await page.fill('#topk', '20');
        await page.press('#query', 'Enter');
        await page.waitForFunction(
          () => document.querySelectorAll('#results .card').length === 5 && document.querySelector('#explanation')!.hasAttribute('hidden'),
        );
        // Every tile scrolled into view (they load lazily), then all loaded and shown.
        for (const card of await page.$$('#results .card')) await card.scrollIntoViewIfNeeded();
        await page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('#results img')].every((i) => i.complete && i.naturalWidth > 0));
        const tiles = await page.$$eval('#results .card', (cards) =>
          cards.map((c) => {
            const img = c.querySelector('img')!;
            return { label: c.getAttribute('aria-label') ?? '', src: img.currentSrc, width: img.naturalWidth, shown: img.getBoundingClientRect().width };
          }),
        );
        const want = deviceScaleFactor === 2 ? 'size=320' : 'size=160';
        for (const t of tiles) {
          expect(t.src, t.label).to.match(/\/api\/images\/\d+\/thumbnail\?size=\d+&expires=/);
          expect(t.src, t.label).to.include(want);
          expect(t.width, t.label).to.be.above(0);
          expect(t.shown, t.label).to.be.above(0);
        }
        expect(tiles.some((t) => t.label.startsWith(scanRedLabel))).to.equal(true);
        // What the grid's images cost: the bytes Chromium received for them.
        const gridBytes = await page.evaluate(() =>
          performance
            .getEntriesByType('resource')
            .filter((e) => (e as PerformanceResourceTiming).initiatorType === 'img')
            .reduce((sum, e) => sum + (e as PerformanceResourceTiming).encodedBodySize, 0),
        );
        console.log(`      grid images at ${viewport.width}×${viewport.height} @${deviceScaleFactor}x: ${gridBytes} bytes (originals: ${originalBytes} bytes)`);
        expect(gridBytes).to.be.above(0);
        expect(gridBytes).to.be.below(2 * 1024 * 1024);
        expect(await layoutProblems(page, 'body')).to.deep.equal([]);
        mkdirSync('test/artifacts', { recursive: true });
        await page.screenshot({ path: `test/artifacts/image-search-formats-${viewport.width}x${viewport.height}.png`, fullPage: true });

        // Opened, the 19 MB TIFF is shown converted; the download link gives the stored bytes.
        await page.click(`#results .card[aria-label^="${scanRedLabel}"]`);
        await page.waitForSelector('#detail[open]');
        await page.waitForFunction(() => {
          const img = document.querySelector<HTMLImageElement>('#detail-img')!;
          return img.complete && img.naturalWidth > 0;
        });
        expect(await page.$eval('#detail-img', (img) => (img as HTMLImageElement).naturalWidth)).to.equal(2048);
        const original = await page.getAttribute('#detail-original', 'href');
        expect(original).to.match(/[?&]original=true$/);
        const stored = await fetch(service.url + original!);
        expect(stored.headers.get('content-type')).to.equal('image/tiff');
        expect((await stored.arrayBuffer()).byteLength).to.be.above(19_000_000);
        expect(await layoutProblems(page, '#detail')).to.deep.equal([]);

        const other = await browser.newPage();
        await other.goto(service.url + '/');
        await other.fill('#token', TEST_API_KEY);
        await other.dispatchEvent('#token', 'change');
        // Nonsense gets the nearest images with a hint that nothing matched well.
        await other.fill('#query', 'xyzzy qwerty');
        await other.press('#query', 'Enter');
        await other.waitForSelector('#explanation:not([hidden])');
        expect(await other.textContent('#explanation')).to.match(/^No image matches this query well/);
        for (const card of await other.$$('#results .card')) await card.scrollIntoViewIfNeeded();
        await other.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('#results img')].every((i) => i.complete));
      } finally {
        await browser.close();
      }
    });
  }
});
