// Which vector index implementation image search runs: the FAISS binding where it is built, else the
// exact in-process index (same interface, exact results, no approximate index strings).
import { ExactIndexConstructor } from './exact-index.js';
import { faissBinding, FaissUnavailableError, type FaissIndexConstructor } from './faiss.js';

/** What a user runs to get FAISS where the exact index runs instead. */
export const ENABLE_FAISS = 'apt-get install libfaiss-dev libopenblas-dev && npm run build:native';

export interface IndexEngine {
  kind: 'faiss' | 'exact';
  Index: FaissIndexConstructor;
  /** Why the exact index runs, and how to enable FAISS (kind 'exact' only). */
  note?: string;
}

export const EXACT_ENGINE: IndexEngine = {
  kind: 'exact',
  Index: ExactIndexConstructor,
  note: `exact in-process index (fine for demo-sized collections); for FAISS: ${ENABLE_FAISS}`,
};

/** FAISS when its binding loads; the exact index when it is not built or cannot load. */
export function indexEngine(): IndexEngine {
  try {
    return { kind: 'faiss', Index: faissBinding() };
  } catch (err) {
    if (!(err instanceof FaissUnavailableError)) throw err;
    return { ...EXACT_ENGINE, note: `${err.message}: ${EXACT_ENGINE.note}` };
  }
}
