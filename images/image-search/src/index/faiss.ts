// Typed loader for Strata's FAISS binding (images/image-search/native, built by hack/build-native.mjs).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// OpenMP reads its settings when libgomp loads (with the addon): spinning threads on a 2-core
// machine make FAISS training ~4x slower, so threads must sleep while they wait.
process.env.OMP_WAIT_POLICY ??= 'PASSIVE';
// OpenBLAS (Debian's pthread build) has its own sgemm threads, which spin ~2^28 cycles between calls by
// default: beside OpenMP's threads on 2 cores they took the CPU from the work (k-means iterations 3.5x
// slower here, ~40% of the CPU time in the kernel yielding). 2^4 cycles (the least OpenBLAS accepts), read
// when libopenblas loads (with the addon).
process.env.OPENBLAS_THREAD_TIMEOUT ??= '4';

export interface SearchResult {
  /** n*k distances (squared L2 for the L2 metric), row-major; unused slots are +Inf / -1. */
  distances: Float32Array;
  labels: BigInt64Array;
}

/** Knobs of one training run; unset = FAISS's default. */
export interface TrainOptions {
  /** Train an L2 IVF's coarse quantizer (nlist >= 1024) by two-level k-means (faster, lower recall before re-ranking). */
  twoLevel?: boolean;
  /** Coarse (IVF) k-means iterations (FAISS: 25). */
  niter?: number;
  /** PQ codebook k-means iterations (FAISS: 25). */
  pqNiter?: number;
  /** PQ training residuals per code (FAISS: 256, i.e. at most 256 * 2^nbits residuals). */
  pqMaxPointsPerCentroid?: number;
  /** Spherical coarse k-means (centroids re-normalised each iteration). */
  spherical?: boolean;
  /** OpenMP threads for this run (default: all processors). */
  threads?: number;
  /** OpenBLAS threads while this run trains (process-wide, restored afterwards; default: leave as is). */
  blasThreads?: number;
}

export interface FaissIndex {
  readonly d: number;
  readonly ntotal: number;
  readonly isTrained: boolean;
  /**
   * Train on n*d floats; `verbose` prints FAISS's own k-means progress to stdout. A boolean third
   * argument is `{twoLevel}`.
   */
  train(vectors: Float32Array, verbose?: boolean, options?: boolean | TrainOptions): Promise<void>;
  addWithIds(vectors: Float32Array, ids: BigInt64Array): Promise<void>;
  /** `nprobe` > 0 applies to this search of an IVF index (SearchParametersIVF; wrapped IVFs such as OPQ,IVF set it under an exclusive lock). */
  search(queries: Float32Array, k: number, nprobe?: number): Promise<SearchResult>;
  removeIds(ids: BigInt64Array): Promise<number>;
  write(file: string): Promise<void>;
  clone(): Promise<FaissIndex>;
  reconstruct(id: number | bigint): Float32Array;
  /** Bytes held by FAISS: IVF indexes by part (lists incl. spare capacity, coarse, codebooks, tables). */
  memoryUsage(): { total: number; lists?: number; coarse?: number; codebooks?: number; tables?: number };
}

export interface FaissIndexConstructor {
  new (dimension: number, description: string, metric?: 'l2' | 'ip'): FaissIndex;
  read(file: string): Promise<FaissIndex>;
}

const addonPath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../native/build/Release/strata_faiss.node');

function load(): FaissIndexConstructor {
  if (!existsSync(addonPath)) {
    throw new Error(`FAISS binding not built (${addonPath} missing): run \`npm run build:native\``);
  }
  const require = createRequire(import.meta.url);
  return (require(addonPath) as { FaissIndex: FaissIndexConstructor }).FaissIndex;
}

export const FaissIndex: FaissIndexConstructor = load();

/** Vectors FAISS wants to train an index string ("IVF4096,PQ32x8" → 4096*39); 0 when it needs no training. */
export function minTrainingVectors(description: string): number {
  const ivf = /IVF(\d+)/.exec(description);
  const pq = /PQ\d+(?:x(\d+))?/.exec(description);
  const centroids = Math.max(ivf ? Number(ivf[1]) : 0, pq ? 2 ** Number(pq[1] ?? 8) : 0);
  return centroids * 39;
}
