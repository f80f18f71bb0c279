import type { IndexEngine } from './engine.js';

/** What the double-buffered index answers: search hits, its status, its merge/rebuild jobs, its errors. */
export interface Hit {
  id: number;
  path: string;
  distance: number;
}

export interface SearchOptions {
  nprobe?: number;
  rerank?: boolean;
  /** Candidates per wanted result when re-ranking (default: the index's rerankFactor). */
  rerankFactor?: number;
}

export interface JobStatus {
  op: 'merge' | 'rebuild';
  state: 'running' | 'done' | 'failed';
  phase: string;
  progress: number;
  startedAt: string;
  finishedAt?: string;
  error?: string;
  result?: Record<string, unknown>;
}

export interface IndexStatus {
  indexString: string;
  dimension: number;
  nextId: number;
  totalVectors: number;
  main: { kind: 'ivf' | 'exact' | 'none'; index: string | null; vectors: number; generation: number };
  buffer: { vectors: number; threshold: number; mergeSuggested: boolean };
  deleted: number;
  purged: number;
  rebuildSuggested: boolean;
  training: { minVectors: number; enoughVectors: boolean; message: string };
  nprobe: number;
  rerank: boolean;
  job: JobStatus | null;
  /** The implementation serving the index: FAISS, or the exact in-process index (with how to enable FAISS). */
  engine: { kind: IndexEngine['kind']; note?: string };
}

/**
 * IVF indexes take ids themselves; other FAISS indexes (Flat, PQ, HNSW, ...) do not, so they are
 * wrapped in an IDMap2 (the ids are the image ids).
 */
export function mainFactory(indexString: string): string {
  return /(^|,)IVF\d/.test(indexString) || /^IDMap/.test(indexString) ? indexString : `IDMap2,${indexString}`;
}

export class IndexBusyError extends Error {
  constructor(readonly job: JobStatus) {
    super(`a ${job.op} is already running (${job.phase})`);
  }
}

export class UnknownIdsError extends Error {
  constructor(readonly ids: number[]) {
    super(`unknown image ids: ${ids.join(', ')}`);
  }
}
