import { expect } from 'chai';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import {
  DEFAULT_TRAINING,
  ImageIndex,
  IndexBusyError,
  UnknownIdsError,
  trainingOptionsFromEnv,
  type ImageIndexOptions,
} from '../../images/image-search/src/index/image-index.js';
import { clusteredVectors, exactTopK, recallAtK } from './support/clustered-vectors.js';

const d = 32;
const row = (x: Float32Array, i: number) => x.slice(i * d, (i + 1) * d);
const names = (from: number, n: number) => Array.from({ length: n }, (_, i) => `img/${from + i}.jpg`);

describe('image-search: double-buffered index', function () {
  this.timeout(120_000);
  let dir: string;
  const data = clusteredVectors(4000, d, 40, 11);
  const options = (): ImageIndexOptions => ({
    dir,
    dim: d,
    indexString: 'IVF16,PQ8x4np',
    nprobe: 8,
    bufferThreshold: 500,
    minTrainingVectors: 2000,
    logger: pino({ level: 'silent' }),
  });
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-image-index-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('runs add → search → remove → merge (exact) → merge (trains) → rebuild → restart', async () => {
    let index = await ImageIndex.open(options());
    const fresh = index.status();
    expect(fresh.main.kind).to.equal('none');
    expect(fresh.training.message).to.match(/exact search fallback: IVF16,PQ8x4np needs at least 2000 vectors/);

    // Added vectors are searchable at once.
    const first = await index.add(data.slice(0, 100 * d), names(0, 100));
    expect(first.added.map((a) => a.id)).to.deep.equal(Array.from({ length: 100 }, (_, i) => i));
    let [hits] = await index.search(row(data, 42), 5);
    expect(hits[0]).to.deep.include({ id: 42, path: 'img/42.jpg' });
    expect(hits[0].distance).to.be.closeTo(0, 1e-5);
    for (let i = 1; i < hits.length; i++) expect(hits[i].distance).to.be.at.least(hits[i - 1].distance);

    // The same path is not indexed twice.
    const again = await index.add(row(data, 42), ['img/42.jpg']);
    expect(again.added).to.have.length(0);
    expect(again.skipped[0]).to.deep.include({ id: 42, reason: 'already indexed' });

    // Remove hides at once; unknown ids change nothing.
    await index.remove([42]);
    [hits] = await index.search(row(data, 42), 5);
    expect(hits.map((h) => h.id)).to.not.include(42);
    let unknown: unknown;
    await index.remove([7, 100000]).catch((e) => (unknown = e));
    expect(unknown).to.be.instanceOf(UnknownIdsError);
    expect(index.isLive(7)).to.equal(true);

    // Too few vectors to train: the merge builds an exact main index.
    index.merge();
    expect(() => index.merge()).to.throw(IndexBusyError);
    let job = await index.waitForJob();
    expect(job).to.deep.include({ op: 'merge', state: 'done' });
    let status = index.status();
    expect(status.main).to.deep.include({ kind: 'exact', vectors: 99 });
    expect(status.buffer.vectors).to.equal(0);
    expect(status.purged).to.equal(1);
    [hits] = await index.search(row(data, 7), 1);
    expect(hits[0].id).to.equal(7);

    // Enough vectors: status suggests a merge, and the merge trains the IVF-PQ index.
    await index.add(data.slice(100 * d, 3000 * d), names(100, 2900));
    status = index.status();
    expect(status.buffer.mergeSuggested).to.equal(true);
    expect(status.training.enoughVectors).to.equal(true);
    index.merge();
    // Search keeps answering while the new index is built on the side.
    let searchesDuringMerge = 0;
    while (index.currentJob?.state === 'running') {
      [hits] = await index.search(row(data, 2500), 3);
      expect(hits[0].id).to.equal(2500);
      searchesDuringMerge++;
    }
    job = await index.waitForJob();
    expect(job?.state, job?.error).to.equal('done');
    expect(searchesDuringMerge).to.be.greaterThan(0);
    status = index.status();
    expect(status.main).to.deep.include({ kind: 'ivf', vectors: 2999 });
    expect(status.buffer.vectors).to.equal(0);
    // Re-ranking on the stored vectors gives exact distances for the approximate candidates.
    [hits] = await index.search(row(data, 2500), 3);
    expect(hits[0]).to.deep.include({ id: 2500 });
    expect(hits[0].distance).to.be.closeTo(0, 1e-5);
    const [approx] = await index.search(row(data, 2500), 3, { rerank: false });
    expect(approx[0].distance).to.be.greaterThan(0);

    // New adds go to the buffer beside the trained main index.
    await index.add(data.slice(3000 * d, 3100 * d), names(3000, 100));
    [hits] = await index.search(row(data, 3050), 1);
    expect(hits[0].id).to.equal(3050);

    // Rebuild drops deleted data physically.
    await index.remove([10, 11, 3050]);
    index.rebuild();
    job = await index.waitForJob();
    expect(job?.state, job?.error).to.equal('done');
    status = index.status();
    expect(status.main).to.deep.include({ kind: 'ivf', vectors: 3100 - 4 });
    expect(status.deleted).to.equal(0);
    expect(status.purged).to.equal(4);
    await index.add(row(data, 3500), ['img/3500.jpg']);
    const before = await index.search(data.slice(0, 20 * d), 5);
    await index.close();

    // Restart: everything comes back.
    index = await ImageIndex.open(options());
    const reloaded = index.status();
    expect(reloaded.main).to.deep.include({ kind: 'ivf', vectors: 3096 });
    expect(reloaded.buffer.vectors).to.equal(1);
    expect(reloaded.nextId).to.equal(3101);
    expect(await index.search(data.slice(0, 20 * d), 5)).to.deep.equal(before);
    expect(index.pathOf(3100)).to.equal('img/3500.jpg');
    expect(index.pathOf(10)).to.equal(undefined);
    await index.close();
  });

  it('recovers from a crash in the middle of an add or a merge', async () => {
    // Leftovers of an add that never reached its manifest, and of a merge that never committed.
    appendFileSync(path.join(dir, 'vectors.f32'), Buffer.alloc(d * 4 * 3));
    appendFileSync(path.join(dir, 'paths.jsonl'), '"img/ghost.jpg"\n"img/torn');
    writeFileSync(path.join(dir, 'main-99.faiss'), 'partial');
    writeFileSync(path.join(dir, 'manifest.json.tmp-1-2'), '{');
    let index = await ImageIndex.open(options());
    expect(index.status()).to.deep.include({ nextId: 3101 });
    expect(statSync(path.join(dir, 'vectors.f32')).size).to.equal(3101 * d * 4);
    expect(existsSync(path.join(dir, 'main-99.faiss'))).to.equal(false);
    expect(existsSync(path.join(dir, 'manifest.json.tmp-1-2'))).to.equal(false);
    const added = await index.add(row(data, 3600), ['img/3600.jpg']);
    expect(added.added[0].id).to.equal(3101);
    const [hits] = await index.search(row(data, 3600), 1);
    expect(hits[0]).to.deep.include({ id: 3101, path: 'img/3600.jpg' });
    await index.close();
    // The torn tail was cut off in place, so the id → path map lines up after the next restart too.
    index = await ImageIndex.open(options());
    expect(index.pathOf(3101)).to.equal('img/3600.jpg');
    expect(index.pathOf(3100)).to.equal('img/3500.jpg');
    expect(index.idOf('img/ghost.jpg')).to.equal(undefined);
    await index.close();
  });

  it('IVF-PQ recall@10 against exact search: re-ranking on the stored vectors lifts it', async () => {
    const other = mkdtempSync(path.join(tmpdir(), 'strata-image-index-recall-'));
    try {
      const index = await ImageIndex.open({ ...options(), dir: other });
      await index.add(data.slice(0, 3500 * d), names(0, 3500));
      index.merge();
      expect((await index.waitForJob())?.state).to.equal('done');
      expect(index.status().main.kind).to.equal('ivf');
      // Held-out queries from the same clusters.
      const queries = data.slice(3500 * d, 3600 * d);
      const truth = exactTopK(data.subarray(0, 3500 * d), queries, d, 10);
      const recall = async (rerank: boolean) =>
        recallAtK(
          (await index.search(queries, 10, { rerank })).map((hits) => hits.map((h) => h.id)),
          truth,
        );
      const approximate = await recall(false);
      const reranked = await recall(true);
      expect(reranked).to.be.at.least(0.95);
      expect(reranked).to.be.greaterThan(approximate);
      // Re-ranking every vector of every list (all lists probed) is exact search.
      const everything = await index.search(queries, 10, { rerank: true, rerankFactor: 350, nprobe: 16 });
      expect(
        recallAtK(
          everything.map((hits) => hits.map((h) => h.id)),
          truth,
        ),
      ).to.equal(1);
      await index.close();
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('training knobs: defaults, IMAGE_SEARCH_TRAIN_* overrides, bad values refused; a rebuild reports what it used', async () => {
    expect(trainingOptionsFromEnv({})).to.deep.equal({ niter: 10, pqNiter: 10, pqMaxPointsPerCentroid: 64 });
    expect(
      trainingOptionsFromEnv({
        IMAGE_SEARCH_TRAIN_NITER: '25',
        IMAGE_SEARCH_TRAIN_PQ_POINTS: '0',
        IMAGE_SEARCH_TRAIN_BLAS_THREADS: '1',
        IMAGE_SEARCH_TRAIN_TWO_LEVEL: 'true',
      }),
    ).to.deep.equal({
      niter: 25,
      pqNiter: 10,
      pqMaxPointsPerCentroid: 0,
      blasThreads: 1,
      twoLevel: true,
    });
    expect(trainingOptionsFromEnv({ IMAGE_SEARCH_TRAIN_NITER: '', IMAGE_SEARCH_TRAIN_TWO_LEVEL: '' })).to.deep.equal({
      niter: 10,
      pqNiter: 10,
      pqMaxPointsPerCentroid: 64,
    });
    expect(() => trainingOptionsFromEnv({ IMAGE_SEARCH_TRAIN_NITER: 'ten' })).to.throw(
      /invalid configuration for image-search:[\s\S]*IMAGE_SEARCH_TRAIN_NITER/,
    );
    expect(() => trainingOptionsFromEnv({ IMAGE_SEARCH_TRAIN_THREADS: '-1', IMAGE_SEARCH_TRAIN_PQ_POINTS: '2000000' })).to.throw(
      /^(?=[\s\S]*IMAGE_SEARCH_TRAIN_THREADS)(?=[\s\S]*IMAGE_SEARCH_TRAIN_PQ_POINTS)/,
    );
    const other = mkdtempSync(path.join(tmpdir(), 'strata-image-index-training-'));
    try {
      const training = { ...DEFAULT_TRAINING, niter: 4, threads: 1 };
      const index = await ImageIndex.open({ ...options(), dir: other, training });
      await index.add(data.slice(0, 2500 * d), names(0, 2500));
      index.rebuild();
      const job = await index.waitForJob();
      expect(job?.state, job?.error).to.equal('done');
      expect(job?.result).to.deep.include({ kind: 'ivf', training });
      await index.close();
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('takes any FAISS index string: non-IVF ones get ids through IDMap2; a bad one fails at open', async () => {
    const other = mkdtempSync(path.join(tmpdir(), 'strata-image-index-hnsw-'));
    try {
      const index = await ImageIndex.open({ ...options(), dir: other, indexString: 'HNSW16', minTrainingVectors: undefined });
      await index.add(data.slice(0, 300 * d), names(0, 300));
      index.merge();
      const job = await index.waitForJob();
      expect(job?.state, job?.error).to.equal('done');
      expect(index.status().main).to.deep.include({ kind: 'ivf', index: 'HNSW16', vectors: 300 });
      const [hits] = await index.search(row(data, 123), 3);
      expect(hits[0]).to.deep.include({ id: 123, path: 'img/123.jpg' });
      await index.close();
      let error: unknown;
      await ImageIndex.open({ ...options(), dir: other, indexString: 'IVF16,NoSuchCode' }).catch((e) => (error = e));
      expect(String(error)).to.match(/image index string "IVF16,NoSuchCode" is not a valid FAISS factory string/);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
