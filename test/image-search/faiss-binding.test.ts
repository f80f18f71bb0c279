import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { faissBinding, minTrainingVectors } from '../../images/image-search/src/index/faiss.js';

const FaissIndex = faissBinding();
import { clusteredVectors, exactTopK, recallAtK } from './support/clustered-vectors.js';

function ids(from: number, n: number): BigInt64Array {
  return BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i));
}

function labelsOf(labels: BigInt64Array, k: number): number[][] {
  const rows: number[][] = [];
  for (let r = 0; r < labels.length / k; r++) rows.push(Array.from(labels.subarray(r * k, r * k + k), Number));
  return rows;
}

describe('image-search: FAISS binding', function () {
  this.timeout(120_000);
  const d = 64;
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-faiss-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('builds indexes from factory strings and rejects a bad one with an error, not a crash', () => {
    const flat = new FaissIndex(d, 'IDMap2,Flat');
    expect(flat.d).to.equal(d);
    expect(flat.isTrained).to.equal(true);
    expect(flat.ntotal).to.equal(0);
    expect(() => new FaissIndex(d, 'NoSuchIndex,,')).to.throw(/invalid index description/);
    expect(() => new FaissIndex(0, 'Flat')).to.throw(/dimension/);
    expect(new FaissIndex(d, 'IVF8,Flat').isTrained).to.equal(false);
  });

  it('adds with ids, searches exactly, removes ids', async () => {
    const x = clusteredVectors(500, d, 10, 3);
    const index = new FaissIndex(d, 'IDMap2,Flat');
    await index.addWithIds(x, ids(1000, 500));
    expect(index.ntotal).to.equal(500);
    const r = await index.search(x.slice(7 * d, 8 * d), 3);
    expect(Number(r.labels[0])).to.equal(1007);
    expect(r.distances[0]).to.be.closeTo(0, 1e-5);
    expect(r.distances[1]).to.be.at.least(r.distances[0]);
    expect(await index.removeIds(BigInt64Array.from([1007n, 99999n]))).to.equal(1);
    const after = await index.search(x.slice(7 * d, 8 * d), 3);
    expect(Array.from(after.labels, Number)).to.not.include(1007);
    expect(Array.from(index.reconstruct(1008))).to.deep.equal(Array.from(x.slice(8 * d, 9 * d)));
  });

  it('rejects mismatched inputs with clear errors', async () => {
    const index = new FaissIndex(d, 'IDMap2,Flat');
    expect(() => index.addWithIds(new Float32Array(d * 2), ids(0, 3))).to.throw(/2 vectors but 3 ids/);
    expect(() => index.search(new Float32Array(d + 1), 1)).to.throw(/multiple of the index dimension/);
    expect(() => index.search(new Float32Array(d), 0)).to.throw(/k must be positive/);
    expect(() => index.addWithIds(new Float64Array(d) as unknown as Float32Array, ids(0, 1))).to.throw(/Float32Array/);
    const ivf = new FaissIndex(d, 'IVF4,Flat');
    expect(() => ivf.addWithIds(new Float32Array(d), ids(0, 1))).to.throw(/not trained/);
    let failed = false;
    await FaissIndex.read(path.join(dir, 'missing.index')).catch(() => (failed = true));
    expect(failed).to.equal(true);
  });

  it('trains IVF-PQ (polysemous off), searches with per-search nprobe and reaches good recall', async () => {
    // Just above the 256 × 39 vectors PQ16x8's codebooks ask for: training time grows with n, recall does not.
    const n = 10_000;
    const x = clusteredVectors(n, d, 200, 5);
    const queries = clusteredVectors(100, d, 200, 5).map((v, i) => v + (i % 3) * 1e-3);
    const index = new FaissIndex(d, 'IVF64,PQ16x8np');
    expect(minTrainingVectors('IVF64,PQ16x8np')).to.equal(256 * 39);
    await index.train(x);
    expect(index.isTrained).to.equal(true);
    await index.addWithIds(x, ids(0, n));
    expect(index.ntotal).to.equal(n);
    const truth = exactTopK(x, queries, d, 10);
    const low = await index.search(queries, 10, 1);
    const high = await index.search(queries, 10, 32);
    const recallLow = recallAtK(labelsOf(low.labels, 10), truth);
    const recallHigh = recallAtK(labelsOf(high.labels, 10), truth);
    expect(recallHigh).to.be.greaterThan(0.5);
    expect(recallHigh).to.be.at.least(recallLow);
    // Round trip through a file keeps the content.
    const file = path.join(dir, 'ivfpq.index');
    await index.write(file);
    const loaded = await FaissIndex.read(file);
    expect(loaded.ntotal).to.equal(n);
    const again = await loaded.search(queries, 10, 32);
    expect(Array.from(again.labels)).to.deep.equal(Array.from(high.labels));
    // Clones are independent.
    const copy = await loaded.clone();
    expect(await copy.removeIds(ids(0, 100))).to.equal(100);
    expect(copy.ntotal).to.equal(n - 100);
    expect(loaded.ntotal).to.equal(n);
  });

  it('takes training knobs (k-means iterations, PQ sample, threads) and refuses bad ones', async () => {
    const n = 10_000; // trained five times below: the fewest vectors PQ16x8 takes without a warning
    const x = clusteredVectors(n, d, 120, 21);
    const queries = x.slice(0, 100 * d);
    const truth = exactTopK(x, queries, d, 10);
    const trained = async (options?: Parameters<InstanceType<typeof FaissIndex>['train']>[2]) => {
      const index = new FaissIndex(d, 'IVF64,PQ16x8np');
      await index.train(x, false, options);
      await index.addWithIds(x, ids(0, n));
      return index.search(queries, 10, 8);
    };
    const fast = await trained({ niter: 10, pqNiter: 10, pqMaxPointsPerCentroid: 64, threads: 1, blasThreads: 1 });
    const once = await trained({ niter: 1, pqNiter: 1, pqMaxPointsPerCentroid: 40 });
    const plain = await trained();
    // The knobs reach FAISS (other centroids, other distances) and the tuned run keeps its recall.
    expect(Array.from(once.distances)).to.not.deep.equal(Array.from(fast.distances));
    const recallFast = recallAtK(labelsOf(fast.labels, 10), truth);
    const recallPlain = recallAtK(labelsOf(plain.labels, 10), truth);
    expect(recallFast).to.be.at.least(recallPlain - 0.05);
    // Deterministic: the same options give the same index.
    const again = await trained({ niter: 10, pqNiter: 10, pqMaxPointsPerCentroid: 64, threads: 1, blasThreads: 1 });
    expect(Array.from(again.labels)).to.deep.equal(Array.from(fast.labels));
    // A boolean third argument is still `twoLevel` (IVF64 is below its nlist >= 1024, so a plain train).
    const legacy = new FaissIndex(d, 'IVF64,PQ16x8np');
    await legacy.train(x, false, true);
    expect(legacy.isTrained).to.equal(true);
    const index = new FaissIndex(d, 'IVF64,PQ16x8np');
    expect(() => index.train(x, false, { niter: -1 })).to.throw(RangeError, /niter/);
    expect(() => index.train(x, false, { threads: 'two' as unknown as number })).to.throw(RangeError, /threads/);
    expect(index.isTrained).to.equal(false);
  });

  it('applies per-search nprobe to an IVF behind a wrapper (pre-transform) and leaves its default alone', async () => {
    const x = clusteredVectors(2000, d, 20, 9);
    // PCA to the full dimension is a rotation: with nprobe = nlist the IVF,Flat search is exact.
    const index = new FaissIndex(d, `PCA${d},IVF16,Flat`);
    await index.train(x);
    await index.addWithIds(x, ids(0, 2000));
    const queries = x.slice(0, 50 * d);
    const truth = exactTopK(x, queries, d, 10);
    const one = recallAtK(labelsOf((await index.search(queries, 10, 1)).labels, 10), truth);
    const all = recallAtK(labelsOf((await index.search(queries, 10, 16)).labels, 10), truth);
    expect(all).to.be.closeTo(1, 1e-9);
    expect(one).to.be.lessThan(all);
    // The index's own nprobe (1) is back after the per-search one.
    const plain = recallAtK(labelsOf((await index.search(queries, 10)).labels, 10), truth);
    expect(plain).to.equal(one);
  });
});
