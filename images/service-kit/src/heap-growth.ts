import v8 from 'node:v8';
import { z } from 'zod';
import { env, loadConfig } from './config.js';

/** How far past its live size the old generation may grow before V8's next full collection, in percent. */
export const DEFAULT_HEAP_GROWING_PERCENT = 200;

/** The variable applyHeapGrowth reads (gateway, data plane and the standalone platform call it at start). */
export const heapGrowthEnvShape = {
  /** How far past its live size V8's old generation grows before a full collection, percent (0: V8's own factor). @tuning */
  STRATA_HEAP_GROWING_PERCENT: env.int(DEFAULT_HEAP_GROWING_PERCENT, 0, 1000),
};

/**
 * Let V8's old generation grow to (1 + percent/100) × its live size before the next full (mark-compact)
 * collection (`--heap-growing-percent`; V8's own factor is 1.1–1.7×), from STRATA_HEAP_GROWING_PERCENT
 * (default 200; 0 keeps V8's factor). Returns the percent applied.
 *
 * Why: the services that stream object bytes hold a small JavaScript heap while every MiB they move
 * passes through Buffers, and the Buffers still in flight when a scavenge runs are promoted and counted
 * against that heap's limit. With V8's own factor the limit sits just above the live size, so a large
 * transfer runs many full collections and marking takes much of its CPU; the larger factor keeps the
 * same peak RSS (figures: hack/bench/measurements.md). Call once at start, before serving (V8 reads
 * the flag at each collection).
 */
export function applyHeapGrowth(source: NodeJS.ProcessEnv = process.env): number {
  const percent = loadConfig('heap', z.object(heapGrowthEnvShape), source).STRATA_HEAP_GROWING_PERCENT;
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}
