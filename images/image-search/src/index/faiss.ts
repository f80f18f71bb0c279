// Typed loader for Strata's FAISS binding (images/image-search/native, built by hack/build-native.mjs).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// OpenMP reads its settings when libgomp loads (with the addon): spinning threads on a 2-core
// machine make FAISS training ~4x slower, so threads must sleep while they wait.
process.env.OMP_WAIT_POLICY ??= 'PASSIVE';

export interface SearchResult {
  /** n*k distances (squared L2 for the L2 metric), row-major; unused slots are +Inf / -1. */
  distances: Float32Array;
  labels: BigInt64Array;
}

export interface FaissIndex {
  readonly d: number;
  readonly ntotal: number;
  readonly isTrained: boolean;
  /**
   * Train on n*d floats; `verbose` prints FAISS's own k-means progress to stdout. L2 IVF indexes with
   * nlist >= 1024 train their coarse quantizer by two-level k-means when `twoLevel` is true.
   */
  train(vectors: Float32Array, verbose?: boolean, twoLevel?: boolean): Promise<void>;
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
