import { loadImageSearchConfig, type ImageSearchConfig } from '../config.js';
import type { TrainOptions } from './faiss.js';

/**
 * Training defaults: fewer coarse k-means iterations than FAISS's 25 and PQ codebooks from fewer
 * residuals per code cost no measurable recall (before or after re-ranking) and cut training
 * several-fold (hack/bench/measurements.md); each stays configurable.
 */
export const DEFAULT_TRAINING: Readonly<TrainOptions> = { niter: 10, pqNiter: 10, pqMaxPointsPerCentroid: 64 };

type TrainingConfig = Pick<
  ImageSearchConfig,
  | 'IMAGE_SEARCH_TRAIN_NITER'
  | 'IMAGE_SEARCH_TRAIN_PQ_NITER'
  | 'IMAGE_SEARCH_TRAIN_PQ_POINTS'
  | 'IMAGE_SEARCH_TRAIN_THREADS'
  | 'IMAGE_SEARCH_TRAIN_BLAS_THREADS'
  | 'IMAGE_SEARCH_TRAIN_TWO_LEVEL'
>;

/** The IMAGE_SEARCH_TRAIN_* variables (validated with the rest of the configuration) as FAISS training options. */
export function trainingOptions(config: TrainingConfig): TrainOptions {
  const out: TrainOptions = { ...DEFAULT_TRAINING };
  const knobs: Array<[number | undefined, keyof TrainOptions]> = [
    [config.IMAGE_SEARCH_TRAIN_NITER, 'niter'],
    [config.IMAGE_SEARCH_TRAIN_PQ_NITER, 'pqNiter'],
    [config.IMAGE_SEARCH_TRAIN_PQ_POINTS, 'pqMaxPointsPerCentroid'],
    [config.IMAGE_SEARCH_TRAIN_THREADS, 'threads'],
    [config.IMAGE_SEARCH_TRAIN_BLAS_THREADS, 'blasThreads'],
  ];
  for (const [value, key] of knobs) if (value !== undefined) (out as Record<string, number>)[key] = value;
  if (config.IMAGE_SEARCH_TRAIN_TWO_LEVEL) out.twoLevel = true;
  return out;
}

/** trainingOptions() straight from an environment (benchmarks); a bad value throws the configuration error. */
export function trainingOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): TrainOptions {
  return trainingOptions(loadImageSearchConfig(env));
}
