import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { EXACT_ENGINE, indexEngine } from '../../images/image-search/src/index/engine.js';
import { ExactIndex, isExactIndexFile } from '../../images/image-search/src/index/exact-index.js';
import { faissBinding } from '../../images/image-search/src/index/faiss.js';
import { ImageIndex, type ImageIndexOptions } from '../../images/image-search/src/index/image-index.js';
import { clusteredVectors } from './support/clustered-vectors.js';

const d = 16;
const row = (x: Float32Array, i: number) => x.slice(i * d, (i + 1) * d);
const names = (from: number, n: number) => Array.from({ length: n }, (_, i) => `img/${from + i}.jpg`);
const ids = (from: number, n: number) => BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i));

/** Where the FAISS binding is not built, image search runs on ExactIndex: the same answers, in plain TypeScript. */
describe('image-search: exact in-process index (no FAISS)', function () {
  this.timeout(120_000);
  let dir: string;
  const data = clusteredVectors(600, d, 12, 5);
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-exact-index-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  for (const metric of ['l2', 'ip'] as const) {
    it(`answers as FAISS's IDMap2,Flat does (${metric}), before and after remove`, async () => {
      const Faiss = faissBinding();
      const faiss = new Faiss(d, 'IDMap2,Flat', metric);
      const exact = new ExactIndex(d, 'IDMap2,Flat', metric);
      for (const index of [faiss, exact]) {
        await index.addWithIds(data.slice(0, 300 * d), ids(1000, 300));
        await index.addWithIds(data.slice(300 * d), ids(5000, 300));
      }
      const queries = data.slice(10 * d, 14 * d);
      const compare = async () => {
        const [a, b] = await Promise.all([faiss.search(queries, 7), exact.search(queries, 7)]);
        expect([...b.labels]).to.deep.equal([...a.labels]);
        [...b.distances].forEach((x, i) => expect(x).to.be.closeTo(a.distances[i], 1e-4));
      };
      await compare();
      expect(await exact.removeIds(BigInt64Array.from([1010n, 1011n, 424242n]))).to.equal(await faiss.removeIds(BigInt64Array.from([1010n, 1011n, 424242n])));
      expect(exact.ntotal).to.equal(faiss.ntotal);
      await compare();
      // More wanted than held: the rest of the row is -1.
      const all = await exact.search(row(data, 0), 700);
      expect(all.labels.filter((l) => l === -1n).length).to.equal(700 - exact.ntotal);
    });
  }

  it('persists, clones and reconstructs; refuses index strings that need FAISS', async () => {
    const exact = new ExactIndex(d, 'IDMap2,Flat', 'ip');
    await exact.addWithIds(data.slice(0, 50 * d), ids(0, 50));
    const file = path.join(dir, 'main-1.faiss');
    await exact.write(file);
    expect(isExactIndexFile(file)).to.equal(true);
    const read = await ExactIndex.read(file);
    const copy = await read.clone();
    await read.removeIds(BigInt64Array.from([3n]));
    expect(copy.ntotal).to.equal(50);
    expect([...copy.reconstruct(3)]).to.deep.equal([...row(data, 3)]);
    expect((await copy.search(row(data, 7), 1)).labels[0]).to.equal(7n);
    expect(() => new ExactIndex(d, 'IVF16,PQ8x4np')).to.throw(/needs the FAISS binding|only Flat/);
  });

  it('serves the double-buffered image index: add, search, remove, merge and restart, and says so in its status', async () => {
    const options: ImageIndexOptions = {
      dir,
      dim: d,
      indexString: 'IVF16,PQ8x4np',
      nprobe: 8,
      bufferThreshold: 100,
      minTrainingVectors: 200,
      engine: EXACT_ENGINE,
      logger: pino({ level: 'silent' }),
    };
    let index = await ImageIndex.open(options);
    expect(index.status().engine).to.deep.include({ kind: 'exact' });
    expect(index.status().engine.note).to.contain('apt-get install libfaiss-dev libopenblas-dev');
    await index.add(data.slice(0, 400 * d), names(0, 400));
    let [hits] = await index.search(row(data, 42), 3);
    expect(hits[0]).to.deep.include({ id: 42, path: 'img/42.jpg' });
    await index.remove([42]);
    // Enough vectors to train IVF16, but the exact engine never trains: the main index stays exact.
    index.merge();
    const job = await index.waitForJob();
    expect(job).to.deep.include({ state: 'done' });
    expect(index.status().main).to.deep.include({ kind: 'exact', vectors: 399 });
    [hits] = await index.search(row(data, 42), 3);
    expect(hits.map((h) => h.id)).to.not.include(42);
    await index.add(row(data, 500), ['img/500.jpg']);
    await index.close();

    index = await ImageIndex.open(options);
    [hits] = await index.search(row(data, 500), 1);
    expect(hits[0]).to.deep.include({ id: 400, path: 'img/500.jpg' });
    expect(index.status().totalVectors).to.equal(400);
    await index.close();
  });

  it('opens state written by the other engine (FAISS ⇄ exact) from the stored vectors', async () => {
    const faiss = indexEngine();
    expect(faiss.kind).to.equal('faiss');
    const options = (engine: typeof faiss): ImageIndexOptions => ({
      dir,
      dim: d,
      indexString: 'Flat',
      nprobe: 1,
      bufferThreshold: 100,
      engine,
      logger: pino({ level: 'silent' }),
    });
    for (const [from, to] of [
      [faiss, EXACT_ENGINE],
      [EXACT_ENGINE, faiss],
    ]) {
      rmSync(dir, { recursive: true, force: true });
      let index = await ImageIndex.open(options(from));
      await index.add(data.slice(0, 100 * d), names(0, 100));
      index.merge();
      await index.waitForJob();
      await index.add(row(data, 300), ['img/300.jpg']);
      await index.close();
      index = await ImageIndex.open(options(to));
      expect(index.status().engine.kind).to.equal(to.kind);
      expect((await index.search(row(data, 20), 1))[0][0]).to.deep.include({ id: 20 });
      expect((await index.search(row(data, 300), 1))[0][0]).to.deep.include({ id: 100 });
      await index.close();
    }
  });
});
