import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import sharp from 'sharp';
import { RenditionCache } from '../../images/image-search/src/renditions.js';
import { colourImage, PALETTE, tempDir } from './support/fixtures.js';

describe('image-search: rendition cache', function () {
  this.timeout(60_000);
  let images: string;
  let cacheDir: string;
  const logger = pino({ level: 'silent' });

  beforeEach(async () => {
    images = tempDir('renditions-images');
    cacheDir = tempDir('renditions-cache');
    let seed = 1;
    for (const [name, rgb] of Object.entries(PALETTE)) writeFileSync(path.join(images, `${name}.png`), await colourImage(rgb, seed++, 640, 480));
  });
  afterEach(() => {
    rmSync(images, { recursive: true, force: true });
    rmSync(cacheDir, { recursive: true, force: true });
  });

  it('keeps at most maxBytes, dropping the least recently used, and knows its files after a restart', async () => {
    const probe = new RenditionCache({ dir: cacheDir, maxBytes: 1 << 30, logger });
    const one = statSync((await probe.thumbnail(path.join(images, 'red.png'), 320, 'png')).file).size;
    rmSync(cacheDir, { recursive: true });
    // Room for about two and a half of these thumbnails.
    const maxBytes = Math.floor(one * 2.5);
    const cache = new RenditionCache({ dir: cacheDir, maxBytes, logger });
    const red = await cache.thumbnail(path.join(images, 'red.png'), 320, 'png');
    const green = await cache.thumbnail(path.join(images, 'green.png'), 320, 'png');
    // Red used again: blue's arrival evicts green, the least recently used.
    await cache.thumbnail(path.join(images, 'red.png'), 320, 'png');
    const blue = await cache.thumbnail(path.join(images, 'blue.png'), 320, 'png');
    expect(existsSync(red.file)).to.equal(true);
    expect(existsSync(green.file)).to.equal(false);
    expect(existsSync(blue.file)).to.equal(true);
    expect(cache.bytes).to.be.at.most(maxBytes);
    const onDisk = readdirSync(cacheDir).reduce((sum, f) => sum + statSync(path.join(cacheDir, f)).size, 0);
    expect(onDisk).to.equal(cache.bytes);

    // A restart counts what is there and removes what a crash left half-written.
    writeFileSync(path.join(cacheDir, 'abc-t160.webp.tmp-1-2'), 'partial');
    const restarted = new RenditionCache({ dir: cacheDir, maxBytes, logger });
    await restarted.thumbnail(path.join(images, 'red.png'), 320, 'png');
    expect(restarted.bytes).to.equal(onDisk);
    expect(readdirSync(cacheDir).some((f) => f.includes('.tmp-'))).to.equal(false);
  });

  it('names renditions by content: a changed file gets a new thumbnail, a copy shares one', async () => {
    const cache = new RenditionCache({ dir: cacheDir, maxBytes: 1 << 30, logger });
    const before = await cache.thumbnail(path.join(images, 'red.png'), 160, 'webp');
    writeFileSync(path.join(images, 'red-copy.png'), readFileSync(path.join(images, 'red.png')));
    expect((await cache.thumbnail(path.join(images, 'red-copy.png'), 160, 'webp')).file).to.equal(before.file);
    writeFileSync(path.join(images, 'red.png'), await colourImage(PALETTE.yellow, 9, 640, 480));
    const after = await cache.thumbnail(path.join(images, 'red.png'), 160, 'webp');
    expect(after.file).to.not.equal(before.file);
    const meta = await sharp(after.file).metadata();
    expect([meta.format, meta.width, meta.height]).to.deep.equal(['webp', 160, 120]);
    // A small image is never enlarged.
    writeFileSync(path.join(images, 'tiny.png'), await colourImage(PALETTE.blue, 3, 40, 30));
    const tiny = await sharp((await cache.thumbnail(path.join(images, 'tiny.png'), 320, 'webp')).file).metadata();
    expect([tiny.width, tiny.height]).to.deep.equal([40, 30]);
  });

  it('makes at most `conversions` renditions at once, however many are asked together (the thread pool stays shared)', async () => {
    // Eight large originals asked for at once: without a bound, libvips would run one on each of libuv's 4 threads.
    const big: string[] = [];
    for (let i = 0; i < 8; i++) {
      const file = path.join(images, `big-${i}.png`);
      writeFileSync(file, await colourImage(Object.values(PALETTE)[i % 4]!, 100 + i, 2400, 1800));
      big.push(file);
    }
    const cache = new RenditionCache({ dir: cacheDir, maxBytes: 1 << 30, logger, conversions: 2 });
    let most = 0;
    let done = false;
    const all = Promise.all(big.map((file) => cache.display(file, 'webp'))).finally(() => (done = true));
    while (!done) {
      most = Math.max(most, sharp.counters().process);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const made = await all;
    expect(new Set(made.map((r) => r.file)).size).to.equal(8);
    expect(most, 'sharp operations running at once').to.be.within(1, 2);
    expect(cache.converting).to.equal(0);
  });
});
