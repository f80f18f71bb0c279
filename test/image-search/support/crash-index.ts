import { pino } from 'pino';
import type { ImageIndexOptions } from '../../../images/image-search/src/index/image-index.js';

/** The vectors' dimension in the crash test and its worker. */
export const CRASH_DIM = 32;

/** The index the crash test and its worker (support/crash-worker.ts) both open: the worker's writes must be readable by the test. */
export function crashIndexOptions(dir: string): ImageIndexOptions {
  return {
    dir,
    dim: CRASH_DIM,
    indexString: 'IVF16,PQ8x4np',
    nprobe: 16,
    bufferThreshold: 500,
    minTrainingVectors: 2000,
    logger: pino({ level: 'silent' }),
  };
}
