// Typed loader for Strata's FAISS binding (images/image-search/native, built by hack/build-native.mjs).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// OpenMP reads its settings when libgomp loads (with the addon): spinning threads on a machine with
// few cores slow FAISS training several-fold, so threads must sleep while they wait.
process.env.OMP_WAIT_POLICY ??= 'PASSIVE';
// OpenBLAS (Debian's pthread build) has its own sgemm threads, which spin ~2^28 cycles between calls by
// default: beside OpenMP's threads on few cores they take the CPU from the work (the kernel busy with
// yields; hack/bench/measurements.md). 2^4 cycles (the least OpenBLAS accepts), read
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

/**
 * The binding's directory (sources and node-gyp's build/): STRATA_FAISS_BINDING_DIR, relative to the
 * working directory, or the one in this repository. hack/build-native.mjs builds the same directory.
 */
export function faissBindingDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.STRATA_FAISS_BINDING_DIR?.trim();
  return dir ? path.resolve(dir) : path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../native');
}

/** The binding is not built, or does not load (e.g. libfaiss is gone since it was built). */
export class FaissUnavailableError extends Error {}

let binding: FaissIndexConstructor | undefined;

/** The FAISS binding, loaded on first use: a process that never asks for it never loads libfaiss or OpenBLAS. */
export function faissBinding(): FaissIndexConstructor {
  if (binding) return binding;
  const addon = path.join(faissBindingDir(), 'build', 'Release', 'strata_faiss.node');
  if (!existsSync(addon)) throw new FaissUnavailableError(`the FAISS binding is not built (no ${addon})`);
  try {
    binding = (createRequire(import.meta.url)(addon) as { FaissIndex: FaissIndexConstructor }).FaissIndex;
  } catch (err) {
    throw new FaissUnavailableError(`the FAISS binding ${addon} does not load: ${err instanceof Error ? err.message : String(err)}`);
  }
  return binding;
}

/** Vectors FAISS wants to train an index string ("IVF4096,PQ32x8" → 4096*39); 0 when it needs no training. */
export function minTrainingVectors(description: string): number {
  const ivf = /IVF(\d+)/.exec(description);
  const pq = /PQ\d+(?:x(\d+))?/.exec(description);
  const centroids = Math.max(ivf ? Number(ivf[1]) : 0, pq ? 2 ** Number(pq[1] ?? 8) : 0);
  return centroids * 39;
}
