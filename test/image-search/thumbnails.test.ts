import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { AUTH_HEADER, startTestImageSearch, type TestImageSearch } from './support/fixtures.js';
import { largeTiff } from './support/large-images.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** What Chromium sends for an <img>. */
const CHROMIUM_IMAGE_ACCEPT = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';

describe('image-search: thumbnails and browser formats', function () {
  this.timeout(180_000);
  let fixture: TestImageSearch;
  let base: string;
  let tiff: Buffer;
  const tiffPath = 'scans/red-scan.tif';

  const search = async (query: string, topk = 20): Promise<Json> =>
    (
      await fetch(`${base}/search`, { method: 'POST', headers: { ...AUTH_HEADER, 'content-type': 'application/json' }, body: JSON.stringify({ query, topk }) })
    ).json();
  const thumbnailFiles = () => readdirSync(path.join(fixture.indexDir, 'thumbnails')).sort();

  before(async () => {
    // Nothing public: every image URL the page gets is a signed one.
    fixture = await startTestImageSearch('thumbnails', { IMAGE_SEARCH_PUBLIC_SOURCES: [] });
    base = fixture.service.url;
    tiff = await largeTiff([215, 35, 35], 11);
    mkdirSync(path.join(fixture.images.dir, 'scans'));
    writeFileSync(path.join(fixture.images.dir, tiffPath), tiff);
    const paths = [...Object.values(fixture.images.colourFiles).flat(), 'colours/red-photo.jpg', tiffPath];
    const added = await fetch(`${base}/api/index/add`, {
      method: 'POST',
      headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
      body: JSON.stringify({ image_paths: paths }),
    });
    expect(added.status).to.equal(200);
  });
  after(async () => {
    await fixture?.close();
  });

  it('gives every result a thumbnail of a few KB (2x for dense screens), made once and cached by content', async () => {
    expect(tiff.length).to.be.above(19_000_000);
    const { results } = await search('red');
    const scan = results.find((r: Json) => r.path === tiffPath);
    expect(scan, 'the TIFF is indexed').to.not.equal(undefined);
    for (const r of results) {
      expect(r.thumbnailUrl).to.match(new RegExp(`^/api/images/${r.id}/thumbnail\\?size=160&expires=\\d+&signature=[\\w-]+$`));
      const [one, two] = r.thumbnailSrcset.split(', ');
      expect(one).to.equal(`${r.thumbnailUrl} 1x`);
      expect(two).to.match(new RegExp(`^/api/images/${r.id}/thumbnail\\?size=320&expires=\\d+&signature=[\\w-]+ 2x$`));
    }
    // The <img> sends no token: the signed URL is what serves it.
    const small = await fetch(base + scan.thumbnailUrl, { headers: { accept: CHROMIUM_IMAGE_ACCEPT } });
    expect(small.status).to.equal(200);
    expect(small.headers.get('content-type')).to.equal('image/webp');
    const smallBytes = Buffer.from(await small.arrayBuffer());
    expect(smallBytes.length).to.be.below(10_000);
    const meta = await sharp(smallBytes).metadata();
    expect(meta.format).to.equal('webp');
    expect(Math.max(meta.width!, meta.height!)).to.equal(160);
    const large = Buffer.from(await (await fetch(base + scan.thumbnailSrcset.split(', ')[1].split(' ')[0])).arrayBuffer());
    expect(Math.max((await sharp(large).metadata()).width!, (await sharp(large).metadata()).height!)).to.equal(320);
    expect(large.length).to.be.below(30_000);

    // Content-addressed on disk: the SHA-256 of the image's bytes and the rendition; asked again, nothing new is made.
    const hash = createHash('sha256').update(tiff).digest('hex').slice(0, 40);
    expect(thumbnailFiles()).to.include.members([`${hash}-t160.webp`, `${hash}-t320.webp`]);
    const before = statSync(path.join(fixture.indexDir, 'thumbnails', `${hash}-t160.webp`)).mtimeMs;
    const again = await fetch(base + scan.thumbnailUrl);
    expect(Buffer.from(await again.arrayBuffer()).equals(smallBytes)).to.equal(true);
    expect(statSync(path.join(fixture.indexDir, 'thumbnails', `${hash}-t160.webp`)).mtimeMs).to.equal(before);

    // Every result's tile is small: the grid of 20 results costs a few hundred KB at most, 2x included.
    let total = 0;
    for (const r of results) {
      for (const url of [r.thumbnailUrl, r.thumbnailSrcset.split(', ')[1].split(' ')[0]]) {
        const response = await fetch(base + url, { headers: { accept: CHROMIUM_IMAGE_ACCEPT } });
        expect(response.status, url).to.equal(200);
        total += (await response.arrayBuffer()).byteLength;
      }
    }
    expect(total).to.be.below(500_000);
  });

  it('answers a thumbnail only to a caller who may read the image, and refuses bad sizes and ids', async () => {
    const { results } = await search('red', 1);
    const [r] = results;
    const plain = `/api/images/${r.id}/thumbnail?size=160`;
    expect((await fetch(base + plain)).status).to.equal(401);
    expect((await fetch(base + r.thumbnailUrl.replace(/signature=[\w-]{4}/, 'signature=AAAA'))).status).to.equal(401);
    expect((await fetch(base + plain, { headers: AUTH_HEADER })).status).to.equal(200);
    // Another image's signature does not open this one.
    const other = (await search('blue', 1)).results[0];
    expect((await fetch(`${base}/api/images/${r.id}/thumbnail?size=160&${other.thumbnailUrl.split('&').slice(1).join('&')}`)).status).to.equal(401);
    const bad = await fetch(`${base}/api/images/${r.id}/thumbnail?size=999`, { headers: AUTH_HEADER });
    expect(bad.status).to.equal(400);
    expect(((await bad.json()) as Json).error.message).to.equal('size must be one of 160, 320');
    for (const id of ['999999', 'abc', '-1']) {
      const missing = await fetch(`${base}/api/images/${id}/thumbnail`, { headers: AUTH_HEADER });
      expect(missing.status, id).to.equal(404);
      expect(((await missing.json()) as Json).error.code).to.equal('not_found');
    }
  });

  it('converts a TIFF to a format the browser shows, and gives the stored bytes with ?original=true', async () => {
    const scan = (await search('red')).results.find((r: Json) => r.path === tiffPath);
    const shown = await fetch(base + scan.url, { headers: { accept: CHROMIUM_IMAGE_ACCEPT } });
    expect(shown.status).to.equal(200);
    expect(shown.headers.get('content-type')).to.equal('image/webp');
    const shownBytes = Buffer.from(await shown.arrayBuffer());
    const meta = await sharp(shownBytes).metadata();
    expect([meta.width, meta.height]).to.deep.equal([2048, 1969]);
    expect(shownBytes.length).to.be.below(tiff.length / 4);
    // A browser that names neither WebP nor a wildcard gets JPEG (no alpha in this scan).
    const jpeg = await fetch(base + scan.url, { headers: { accept: 'image/png,image/jpeg' } });
    expect(jpeg.headers.get('content-type')).to.equal('image/jpeg');
    expect((await sharp(Buffer.from(await jpeg.arrayBuffer())).metadata()).format).to.equal('jpeg');
    const original = await fetch(`${base + scan.url}&original=true`, { headers: { accept: CHROMIUM_IMAGE_ACCEPT } });
    expect(original.status).to.equal(200);
    expect(original.headers.get('content-type')).to.equal('image/tiff');
    expect(Buffer.from(await original.arrayBuffer()).equals(tiff)).to.equal(true);
    // What browsers show is sent as it is.
    const png = (await search('green', 1)).results[0];
    const pngBytes = Buffer.from(await (await fetch(base + png.url, { headers: { accept: CHROMIUM_IMAGE_ACCEPT } })).arrayBuffer());
    expect((await sharp(pngBytes).metadata()).format).to.equal('png');
    // The conversion is read under the same rule as the original: not without a signature or a token.
    expect((await fetch(base + scan.url.split('?')[0])).status).to.equal(401);
  });
});
