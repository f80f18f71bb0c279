// The double-buffered vector index behind image search.
//
//   main index   trained IVF-PQ (or an exact IDMap2,Flat until there are enough vectors to train)
//                holding ids [0, mainUpTo) minus purged ones; never mutated once in service
//   buffer       exact IDMap2,Flat index of ids [mainUpTo, nextId): new vectors, searchable at once
//   deleted      ids hidden from results at once; physically dropped by merge (buffer) or rebuild (main)
//
// Merge and rebuild build a new main index on the side (clone + add, or train from the stored raw
// vectors), write it under a new generation's file name, then under the mutation lock swap main and
// buffer in one step and write the manifest last. The manifest is the commit point: a crash at any
// moment leaves the previous manifest, whose files are all still there.
import { promises as fs, existsSync, readdirSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../../service-kit/src/index.js';
import { minTrainingVectors, type FaissIndex, type TrainOptions } from './faiss.js';
import { indexEngine, type IndexEngine } from './engine.js';
import { isExactIndexFile } from './exact-index.js';
import { writeFileAtomic, syncDir } from '../atomic-file.js';
import { VectorLog } from './vector-log.js';
import { DEFAULT_TRAINING } from './training-options.js';
import { IndexBusyError, mainFactory, UnknownIdsError, type Hit, type IndexStatus, type JobStatus, type SearchOptions } from './index-types.js';

export * from './index-types.js';
export * from './training-options.js';

const EXACT = 'IDMap2,Flat';
const ADD_BATCH = 50_000;

export interface ImageIndexOptions {
  dir: string;
  dim?: number;
  /** FAISS factory string of the trained main index (default IVF4096,PQ32x8). */
  indexString: string;
  nprobe: number;
  bufferThreshold: number;
  /** Re-rank approximate candidates by exact distance on the stored float vectors. */
  rerank?: boolean;
  /** Candidates per wanted result when re-ranking. */
  rerankFactor?: number;
  /** Override of the vectors needed before training (default: what FAISS wants for the index string). */
  minTrainingVectors?: number;
  /** Vectors sampled for training (default: 40 per centroid, the least FAISS accepts without warning). */
  trainingSampleSize?: number;
  /** Print FAISS's k-means progress while training (default: when the log level is debug). */
  verboseTraining?: boolean;
  /** FAISS training knobs (default: DEFAULT_TRAINING; the service passes trainingOptions(config)). */
  training?: TrainOptions;
  /** FAISS or the exact in-process index (default: indexEngine(), FAISS where its binding loads). */
  engine?: IndexEngine;
  logger: Logger;
}

interface Manifest {
  version: 1;
  dim: number;
  indexString: string;
  generation: number;
  nextId: number;
  mainUpTo: number;
  main: { file: string; kind: 'ivf' | 'exact' } | null;
  deleted: number[];
  purged: number[];
}

/** What a search reads, swapped as one object so a search never sees half a merge. */
interface View {
  main: FaissIndex | null;
  mainKind: 'ivf' | 'exact' | null;
  buffer: FaissIndex;
  mainUpTo: number;
}

export class ImageIndex {
  private view!: View;
  private manifest!: Manifest;
  private log!: VectorLog;
  private readonly deleted = new Set<number>();
  private readonly purged = new Set<number>();
  private readonly idOfPath = new Map<string, number>();
  private mutations: Promise<unknown> = Promise.resolve();
  private job: JobStatus | null = null;
  private jobPromise: Promise<void> | null = null;
  readonly dim: number;
  private readonly minTrain: number;
  private readonly training: TrainOptions;
  private readonly engine: IndexEngine;

  /** Factory string of the trained main index (the configured one, given ids where it needs them). */
  private readonly mainFactory: string;

  private constructor(private readonly opts: ImageIndexOptions) {
    this.dim = opts.dim ?? 512;
    this.minTrain = opts.minTrainingVectors ?? minTrainingVectors(opts.indexString);
    this.mainFactory = mainFactory(opts.indexString);
    this.training = opts.training ?? DEFAULT_TRAINING;
    this.engine = opts.engine ?? indexEngine();
    // The exact engine never trains: its main index stays exact whatever the index string.
    if (this.engine.kind === 'exact') return;
    // A bad index string is a configuration error at start, not a failed merge later.
    try {
      new this.engine.Index(this.dim, this.mainFactory);
    } catch (err) {
      throw new Error(
        `image index string ${JSON.stringify(opts.indexString)} is not a valid FAISS factory string: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  static async open(opts: ImageIndexOptions): Promise<ImageIndex> {
    const index = new ImageIndex(opts);
    await index.load();
    return index;
  }

  private get manifestFile(): string {
    return path.join(this.opts.dir, 'manifest.json');
  }

  private async load(): Promise<void> {
    await fs.mkdir(this.opts.dir, { recursive: true });
    const manifest: Manifest = existsSync(this.manifestFile)
      ? (JSON.parse(await fs.readFile(this.manifestFile, 'utf8')) as Manifest)
      : { version: 1, dim: this.dim, indexString: this.opts.indexString, generation: 0, nextId: 0, mainUpTo: 0, main: null, deleted: [], purged: [] };
    if (manifest.dim !== this.dim) throw new Error(`index state in ${this.opts.dir} has dimension ${manifest.dim}, expected ${this.dim}`);
    this.manifest = manifest;
    this.log = new VectorLog(this.opts.dir, this.dim, manifest.nextId);
    manifest.deleted.forEach((id) => this.deleted.add(id));
    manifest.purged.forEach((id) => this.purged.add(id));
    this.log.paths.forEach((p, id) => {
      if (!this.deleted.has(id) && !this.purged.has(id)) this.idOfPath.set(p, id);
    });
    const main = manifest.main ? await this.readMain(manifest.main, manifest.mainUpTo) : null;
    const buffer = await this.bufferFrom(manifest.mainUpTo);
    this.view = { main: main?.index ?? null, mainKind: main?.kind ?? null, buffer, mainUpTo: manifest.mainUpTo };
    this.removeStrayFiles();
    this.opts.logger.info(
      {
        dir: this.opts.dir,
        nextId: manifest.nextId,
        main: manifest.main,
        buffer: buffer.ntotal,
        engine: this.engine.kind,
        ...(this.engine.note ? { engineNote: this.engine.note } : {}),
      },
      'image index loaded',
    );
  }

  /** The main index file as this engine reads it; a file the other engine wrote is rebuilt exact from the stored vectors. */
  private async readMain(main: NonNullable<Manifest['main']>, upTo: number): Promise<{ index: FaissIndex; kind: 'ivf' | 'exact' }> {
    const file = path.join(this.opts.dir, main.file);
    if (isExactIndexFile(file) === (this.engine.kind === 'exact')) return { index: await this.engine.Index.read(file), kind: main.kind };
    this.opts.logger.warn(
      { file, engine: this.engine.kind },
      'main index written by the other index engine: rebuilt as an exact index from the stored vectors',
    );
    return { index: await this.bufferFrom(0, upTo), kind: 'exact' };
  }

  /** Files from an interrupted merge/rebuild (never committed by a manifest). */
  private removeStrayFiles(): void {
    for (const name of readdirSync(this.opts.dir)) {
      const stray = name.includes('.tmp-') || name.endsWith('.tmp') || (/^main-\d+\.faiss$/.test(name) && name !== this.manifest.main?.file);
      if (stray) unlinkSync(path.join(this.opts.dir, name));
    }
  }

  /** An exact index over the live ids [from, to) (default: to nextId). */
  private async bufferFrom(from: number, to = this.log.size): Promise<FaissIndex> {
    const buffer = new this.engine.Index(this.dim, EXACT);
    for (let start = from; start < to; start += ADD_BATCH) {
      const end = Math.min(to, start + ADD_BATCH);
      const live = this.liveIds(start, end);
      if (live.length) await buffer.addWithIds(this.log.read(live), BigInt64Array.from(live, BigInt));
    }
    return buffer;
  }

  private liveIds(from: number, to: number, hidden: Set<number> = this.deleted): number[] {
    const out: number[] = [];
    for (let id = from; id < to; id++) if (!hidden.has(id) && !this.purged.has(id)) out.push(id);
    return out;
  }

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.mutations.then(fn, fn);
    this.mutations = run.catch(() => undefined);
    return run;
  }

  private async commit(changes: Partial<Manifest>): Promise<void> {
    const next: Manifest = { ...this.manifest, ...changes, nextId: this.log.size, deleted: [...this.deleted], purged: [...this.purged] };
    await writeFileAtomic(this.manifestFile, JSON.stringify(next));
    this.manifest = next;
  }

  pathOf(id: number): string | undefined {
    return this.isLive(id) ? this.log.paths[id] : undefined;
  }

  idOf(imagePath: string): number | undefined {
    return this.idOfPath.get(imagePath);
  }

  isLive(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.log.size && !this.deleted.has(id) && !this.purged.has(id);
  }

  /** The stored float vector of a live id. */
  vectorOf(id: number): Float32Array | undefined {
    return this.isLive(id) ? this.log.read([id]) : undefined;
  }

  get liveCount(): number {
    return this.log.size - this.deleted.size - this.purged.size;
  }

  /**
   * Add vectors for image paths; paths already indexed are skipped, or with `replace` get the new
   * vector under a new id while their old id is deleted in the same commit (the image changed).
   * Searchable when this resolves.
   */
  add(
    vectors: Float32Array,
    paths: string[],
    options: { replace?: boolean } = {},
  ): Promise<{ added: Array<{ id: number; path: string }>; skipped: Array<{ id: number; path: string; reason: string }>; replaced: number[] }> {
    if (vectors.length !== paths.length * this.dim) throw new RangeError(`expected ${paths.length} vectors of dimension ${this.dim}`);
    return this.serialize(async () => {
      const skipped: Array<{ id: number; path: string; reason: string }> = [];
      const replaced: number[] = [];
      const keep: number[] = [];
      const seen = new Set<string>();
      paths.forEach((p, i) => {
        const existing = this.idOfPath.get(p);
        if (existing !== undefined && !options.replace) skipped.push({ id: existing, path: p, reason: 'already indexed' });
        else if (!seen.has(p)) {
          seen.add(p);
          keep.push(i);
          if (existing !== undefined) replaced.push(existing);
        }
      });
      if (!keep.length) return { added: [], skipped, replaced };
      const rows = new Float32Array(keep.length * this.dim);
      keep.forEach((src, j) => rows.set(vectors.subarray(src * this.dim, (src + 1) * this.dim), j * this.dim));
      const keptPaths = keep.map((i) => paths[i]);
      const first = this.log.append(rows, keptPaths);
      const ids = BigInt64Array.from(keptPaths, (_, j) => BigInt(first + j));
      await this.view.buffer.addWithIds(rows, ids);
      replaced.forEach((id) => this.deleted.add(id));
      await this.commit({});
      const added = keptPaths.map((p, j) => ({ id: first + j, path: p }));
      added.forEach((a) => this.idOfPath.set(a.path, a.id));
      return { added, skipped, replaced };
    });
  }

  /** Hide ids at once. All ids must be live, else nothing changes. */
  remove(ids: number[]): Promise<{ removed: number[] }> {
    return this.serialize(async () => {
      const unknown = ids.filter((id) => !this.isLive(id));
      if (unknown.length) throw new UnknownIdsError(unknown);
      const unique = [...new Set(ids)];
      unique.forEach((id) => {
        this.deleted.add(id);
        this.idOfPath.delete(this.log.paths[id]);
      });
      await this.commit({});
      return { removed: unique };
    });
  }

  /** k nearest live images for each query (rows of `queries`), closest first; distance is squared L2. */
  async search(queries: Float32Array, k: number, options: SearchOptions = {}): Promise<Hit[][]> {
    const view = this.view;
    const n = queries.length / this.dim;
    const rerank = (options.rerank ?? this.opts.rerank ?? true) && view.mainKind === 'ivf';
    // Over-fetch so that hidden (deleted) ids do not leave a result list short.
    const want = k + Math.min(this.deleted.size, 1024);
    const mainK = rerank ? Math.max(want, k * (options.rerankFactor ?? this.opts.rerankFactor ?? 10)) : want;
    const nprobe = options.nprobe ?? this.opts.nprobe;
    const [mainResult, bufferResult] = await Promise.all([
      view.main && view.main.ntotal > 0 ? view.main.search(queries, Math.min(mainK, view.main.ntotal), view.mainKind === 'ivf' ? nprobe : 0) : null,
      view.buffer.ntotal > 0 ? view.buffer.search(queries, Math.min(want, view.buffer.ntotal)) : null,
    ]);
    const out: Hit[][] = [];
    for (let q = 0; q < n; q++) {
      const candidates = new Map<number, number>();
      const collect = (result: { distances: Float32Array; labels: BigInt64Array } | null, width: number) => {
        if (!result) return;
        for (let j = q * width; j < (q + 1) * width; j++) {
          const id = Number(result.labels[j]);
          if (id >= 0 && !this.deleted.has(id)) candidates.set(id, result.distances[j]);
        }
      };
      collect(mainResult, mainResult ? mainResult.labels.length / n : 0);
      if (rerank && candidates.size) this.exactDistances(queries.subarray(q * this.dim, (q + 1) * this.dim), candidates);
      collect(bufferResult, bufferResult ? bufferResult.labels.length / n : 0);
      out.push(
        [...candidates]
          .sort((a, b) => a[1] - b[1] || a[0] - b[0])
          .slice(0, k)
          .map(([id, distance]) => ({ id, path: this.log.paths[id], distance })),
      );
    }
    return out;
  }

  /** Replace approximate distances by exact squared L2 on the stored float vectors. */
  private exactDistances(query: Float32Array, candidates: Map<number, number>): void {
    const ids = [...candidates.keys()];
    const rows = this.log.read(ids);
    ids.forEach((id, i) => {
      let s = 0;
      for (let j = 0; j < this.dim; j++) {
        const diff = rows[i * this.dim + j] - query[j];
        s += diff * diff;
      }
      candidates.set(id, s);
    });
  }

  status(): IndexStatus {
    const view = this.view;
    const bufferCount = view.buffer.ntotal;
    const enough = this.canTrain(this.liveCount);
    return {
      indexString: this.opts.indexString,
      dimension: this.dim,
      nextId: this.log.size,
      totalVectors: this.liveCount,
      main: {
        kind: view.mainKind ?? 'none',
        index: view.mainKind === 'ivf' ? this.opts.indexString : view.mainKind === 'exact' ? EXACT : null,
        vectors: view.main?.ntotal ?? 0,
        generation: this.manifest.generation,
      },
      buffer: {
        vectors: bufferCount,
        threshold: this.opts.bufferThreshold,
        mergeSuggested: bufferCount > this.opts.bufferThreshold,
      },
      deleted: this.deleted.size,
      purged: this.purged.size,
      rebuildSuggested: this.deleted.size > this.opts.bufferThreshold,
      training: {
        minVectors: this.minTrain,
        enoughVectors: enough,
        message:
          this.engine.kind === 'exact'
            ? `exact in-process index: ${this.opts.indexString} needs FAISS`
            : view.mainKind === 'ivf'
              ? `trained ${this.opts.indexString}`
              : enough
                ? `${this.liveCount} vectors: enough to train ${this.opts.indexString}; run a merge or rebuild`
                : `exact search fallback: ${this.opts.indexString} needs at least ${this.minTrain} vectors to train, have ${this.liveCount}`,
      },
      nprobe: this.opts.nprobe,
      rerank: this.opts.rerank ?? true,
      job: this.job,
      engine: { kind: this.engine.kind, ...(this.engine.note ? { note: this.engine.note } : {}) },
    };
  }

  /** Whether `vectors` live vectors are enough to train the configured index (never on the exact engine). */
  private canTrain(vectors: number): boolean {
    return this.engine.kind === 'faiss' && vectors >= this.minTrain;
  }

  get currentJob(): JobStatus | null {
    return this.job;
  }

  /** Resolves when the running background job (if any) has finished. */
  async waitForJob(): Promise<JobStatus | null> {
    await this.jobPromise;
    return this.job;
  }

  /** Start moving the buffer into the main index in the background. */
  merge(): JobStatus {
    return this.startJob('merge', (job) => this.runMerge(job));
  }

  /** Start retraining the main index from all live vectors (drops deleted data) in the background. */
  rebuild(): JobStatus {
    return this.startJob('rebuild', (job) => this.runRebuild(job));
  }

  private startJob(op: JobStatus['op'], work: (job: JobStatus) => Promise<Record<string, unknown>>): JobStatus {
    if (this.job?.state === 'running') throw new IndexBusyError(this.job);
    const job: JobStatus = { op, state: 'running', phase: 'starting', progress: 0, startedAt: new Date().toISOString() };
    this.job = job;
    this.opts.logger.info({ op }, 'index job started');
    this.jobPromise = work(job).then(
      (result) => {
        Object.assign(job, { state: 'done', phase: 'done', progress: 1, result, finishedAt: new Date().toISOString() });
        this.opts.logger.info({ op, result }, 'index job finished');
      },
      (err: unknown) => {
        Object.assign(job, { state: 'failed', error: err instanceof Error ? err.message : String(err), finishedAt: new Date().toISOString() });
        this.opts.logger.error({ op, err }, 'index job failed');
      },
    );
    return job;
  }

  private async runMerge(job: JobStatus): Promise<Record<string, unknown>> {
    const { view, upTo, hidden } = await this.serialize(async () => ({ view: this.view, upTo: this.log.size, hidden: new Set(this.deleted) }));
    const moving = this.liveIds(view.mainUpTo, upTo, hidden);
    // An untrained or exact main with enough data becomes a trained index: that is a rebuild.
    if (view.mainKind !== 'ivf' && this.canTrain(this.liveCount)) return this.runRebuild(job);
    const dropped = [...hidden].filter((id) => id >= view.mainUpTo && id < upTo);
    // Nothing in the buffer: no new generation (copying and writing a big index for nothing).
    if (view.main && !moving.length && !dropped.length)
      return { moved: 0, droppedDeleted: 0, mainVectors: view.main.ntotal, kind: view.mainKind, note: 'buffer empty: nothing to merge' };
    job.phase = 'copying main index';
    const next = view.main ? await view.main.clone() : new this.engine.Index(this.dim, EXACT);
    job.phase = 'adding buffer';
    await this.addIds(next, moving, job);
    const kind = view.mainKind ?? 'exact';
    await this.install(job, next, kind, upTo, dropped);
    return { moved: moving.length, droppedDeleted: dropped.length, mainVectors: next.ntotal, kind };
  }

  private async runRebuild(job: JobStatus): Promise<Record<string, unknown>> {
    const { upTo, hidden } = await this.serialize(async () => ({ upTo: this.log.size, hidden: new Set(this.deleted) }));
    const live = this.liveIds(0, upTo, hidden);
    const trained = this.canTrain(live.length);
    const next = new this.engine.Index(this.dim, trained ? this.mainFactory : EXACT);
    const started = performance.now();
    if (trained) {
      job.phase = `training ${this.opts.indexString} on ${live.length} vectors`;
      // A strided sample bounds memory and k-means time (linear in the sample); FAISS wants 39 points
      // per centroid, 40 gives ~the same recall as 256 at a fraction of the cost on 2 cores.
      const cap = Math.max(this.opts.trainingSampleSize ?? 0, Math.ceil((this.minTrain / 39) * 40));
      const step = Math.max(1, live.length / cap);
      const sample: number[] = [];
      for (let i = 0; i < live.length && sample.length < cap; i += step) sample.push(live[Math.floor(i)]);
      await next.train(this.log.read(sample), this.opts.verboseTraining ?? this.opts.logger.isLevelEnabled('debug'), this.training);
    }
    const trainedAt = performance.now();
    job.phase = 'adding vectors';
    await this.addIds(next, live, job);
    const addedAt = performance.now();
    const dropped = [...hidden].filter((id) => id < upTo);
    await this.install(job, next, trained ? 'ivf' : 'exact', upTo, dropped);
    return {
      vectors: live.length,
      droppedDeleted: dropped.length,
      kind: trained ? 'ivf' : 'exact',
      trainSeconds: (trainedAt - started) / 1000,
      training: this.training,
      addSeconds: (addedAt - trainedAt) / 1000,
      writeSeconds: (performance.now() - addedAt) / 1000,
    };
  }

  private async addIds(index: FaissIndex, ids: number[], job: JobStatus): Promise<void> {
    for (let start = 0; start < ids.length; start += ADD_BATCH) {
      const batch = ids.slice(start, start + ADD_BATCH);
      await index.addWithIds(this.log.read(batch), BigInt64Array.from(batch, BigInt));
      job.progress = Math.min(0.99, (start + batch.length) / ids.length);
    }
  }

  /** Write the new main index, then swap it in with a fresh buffer and commit the manifest. */
  private async install(job: JobStatus, built: FaissIndex, kind: 'ivf' | 'exact', upTo: number, dropped: number[]): Promise<void> {
    job.phase = 'writing index';
    const generation = this.manifest.generation + 1;
    const file = `main-${generation}.faiss`;
    const tmp = path.join(this.opts.dir, `${file}.tmp`);
    await built.write(tmp);
    await fs.rename(tmp, path.join(this.opts.dir, file));
    await syncDir(this.opts.dir);
    // Serve what was written: proves the file reads back, and its lists are sized exactly
    // (lists grown by add keep up to 2x spare capacity).
    const next = await this.engine.Index.read(path.join(this.opts.dir, file));
    job.phase = 'swapping';
    await this.serialize(async () => {
      const buffer = await this.bufferFrom(upTo);
      dropped.forEach((id) => {
        this.deleted.delete(id);
        this.purged.add(id);
      });
      const previous = this.manifest.main?.file;
      await this.commit({ generation, mainUpTo: upTo, main: { file, kind } });
      this.view = { main: next, mainKind: kind, buffer, mainUpTo: upTo };
      if (previous) await fs.rm(path.join(this.opts.dir, previous), { force: true });
    });
  }

  async close(): Promise<void> {
    await this.jobPromise;
    await this.mutations;
    this.log.close();
  }
}
