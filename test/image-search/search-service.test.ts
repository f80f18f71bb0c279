import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pino } from 'pino';
import { ClipEncoder, type Embedder } from '../../images/image-search/src/clip/encoder.js';
import type { Viewer } from '../../images/image-search/src/image-access.js';
import { ImageFiles } from '../../images/image-search/src/image-files.js';
import { ImageIndex } from '../../images/image-search/src/index/image-index.js';
import { SearchService } from '../../images/image-search/src/search-service.js';
import { makeImageDir, makeTestModel, tempDir } from './support/fixtures.js';

/** A viewer that may read the paths `may` accepts. */
const viewerOf = (may: (path: string) => boolean): Viewer => ({ mayRead: may, url: (p) => `/images/${p}`, thumbnailUrl: (id, _p, size) => `/t/${id}/${size}` });
const EVERYTHING = viewerOf(() => true);

describe('image-search: SearchService adds each image once, and searches only what the viewer may read', function () {
  this.timeout(60_000);
  const dirs: string[] = [];
  let encoder: ClipEncoder;
  let index: ImageIndex;
  let service: SearchService;
  let images: Awaited<ReturnType<typeof makeImageDir>>;
  /** Images handed to the encoder. */
  let encoded = 0;

  before(async () => {
    const modelDir = makeTestModel();
    images = await makeImageDir();
    const indexDir = tempDir('search-service');
    dirs.push(modelDir, images.dir, indexDir);
    encoder = await ClipEncoder.load(modelDir);
    const counting: Embedder = {
      dim: encoder.dim,
      encodeImages: (list) => {
        encoded += list.length;
        return encoder.encodeImages(list);
      },
      encodeTexts: (texts) => encoder.encodeTexts(texts),
    };
    index = await ImageIndex.open({
      dir: indexDir,
      dim: encoder.dim,
      indexString: 'IVF16,Flat',
      nprobe: 4,
      bufferThreshold: 100,
      logger: pino({ level: 'silent' }),
    });
    service = new SearchService({ index, files: new ImageFiles(images.dir), embedder: counting, defaultTopk: 10, maxTopk: 100 });
  });
  after(async () => {
    await index?.close();
    await encoder?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('drops repeated and already indexed paths before encoding', async () => {
    const [red, green] = [images.colourFiles.red[0], images.colourFiles.green[0]];
    const first = await service.addPaths(
      Array.from({ length: 1000 }, (_, i) => (i % 2 ? red : `./${red}`)),
      EVERYTHING,
    );
    expect(first.added.map((a) => a.path)).to.deep.equal([red]);
    expect(encoded).to.equal(1);
    const second = await service.addPaths([red, green, green, red], EVERYTHING);
    expect(second.added.map((a) => a.path)).to.deep.equal([green]);
    expect(second.skipped.map((s) => [s.path, s.reason])).to.deep.equal([
      [red, 'already indexed'],
      [red, 'already indexed'],
    ]);
    expect(encoded).to.equal(2);
    expect(index.status().totalVectors).to.equal(2);
  });

  it('indexPaths encodes each path once and reports what does not decode', async () => {
    encoded = 0;
    const blue = images.colourFiles.blue[0];
    const result = await service.indexPaths([blue, blue, 'broken.png', 'broken.png', blue]);
    expect(result).to.deep.include({ added: 1, replaced: 0 });
    expect(result.skipped.map((s) => s.path)).to.deep.equal(['broken.png']);
    expect(result.skipped[0].reason).to.match(/not a decodable image/);
    expect(encoded).to.equal(2);
  });

  it('filters before top-k: a viewer gets topk images it may read though nearer ones are not theirs', async () => {
    await service.indexDirectory();
    const blueOnly = viewerOf((p) => images.colourFiles.blue.includes(p));
    // Every red image is nearer to "red" than any blue one: filtering after the top 3 would leave none.
    const nearest = await service.searchTexts(['red'], 3, EVERYTHING);
    expect(nearest.every((r) => !r.path.includes('blue'))).to.equal(true);
    const results = await service.searchTexts(['red'], 3, blueOnly);
    expect(results.map((r) => r.path).sort()).to.deep.equal([...images.colourFiles.blue].sort());
    const [byImage] = await service.searchImage(await readFile(path.join(images.dir, images.colourFiles.red[0])), 1, blueOnly);
    expect(images.colourFiles.blue).to.include(byImage.path);
    // More like an image: the caller's own only; an image they may not read is unknown to them.
    const blueId = index.idOf(images.colourFiles.blue[0])!;
    const similar = await service.searchSimilar(blueId, 2, blueOnly);
    expect(similar.map((r) => r.path).sort()).to.deep.equal(images.colourFiles.blue.slice(1).sort());
    let refused: unknown;
    await service.searchSimilar(index.idOf(images.colourFiles.red[0])!, 2, blueOnly).catch((err: unknown) => (refused = err));
    expect((refused as { status?: number }).status).to.equal(404);
    expect(
      await service.searchTexts(
        ['red'],
        5,
        viewerOf(() => false),
      ),
    ).to.deep.equal([]);
  });
});
