// Deterministic unit vectors with cluster structure (like image embeddings), for index tests and the bench.
import { mulberry32 } from '../../../images/service-kit/src/random.js';

/** Small fast PRNG (mulberry32) so every run sees the same data. */
export const rng = mulberry32;

function gaussian(rand: () => number): number {
  return Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
}

export function normalizeRows(x: Float32Array, d: number): Float32Array {
  for (let r = 0; r < x.length / d; r++) {
    let s = 0;
    for (let j = 0; j < d; j++) s += x[r * d + j] * x[r * d + j];
    const inv = 1 / Math.sqrt(s || 1);
    for (let j = 0; j < d; j++) x[r * d + j] *= inv;
  }
  return x;
}

/** `rows` unit vectors of dimension d in random (Gaussian) directions, drawn from `rand`. */
function randomUnitRows(rand: () => number, rows: number, d: number): Float32Array {
  const x = new Float32Array(rows * d);
  for (let i = 0; i < x.length; i++) x[i] = gaussian(rand);
  return normalizeRows(x, d);
}

/** n unit vectors of dimension d around `clusters` random centres, spread `noise` around each. */
export function clusteredVectors(n: number, d: number, clusters: number, seed = 1, noise = 0.5): Float32Array {
  const rand = rng(seed);
  const centres = randomUnitRows(rand, clusters, d);
  const out = new Float32Array(n * d);
  const scale = noise / Math.sqrt(d);
  for (let i = 0; i < n; i++) {
    const c = Math.floor(rand() * clusters);
    for (let j = 0; j < d; j++) out[i * d + j] = centres[c * d + j] + scale * gaussian(rand);
  }
  return normalizeRows(out, d);
}

/** Exact top-k ids (squared L2) of each query against the base set, for recall measurements. */
export function exactTopK(base: Float32Array, queries: Float32Array, d: number, k: number): number[][] {
  const n = base.length / d;
  const result: number[][] = [];
  for (let q = 0; q < queries.length / d; q++) {
    const best: Array<[number, number]> = [];
    for (let i = 0; i < n; i++) {
      let s = 0;
      for (let j = 0; j < d; j++) {
        const diff = base[i * d + j] - queries[q * d + j];
        s += diff * diff;
      }
      if (best.length < k || s < best[best.length - 1][0]) {
        best.push([s, i]);
        best.sort((a, b) => a[0] - b[0]);
        if (best.length > k) best.pop();
      }
    }
    result.push(best.map((b) => b[1]));
  }
  return result;
}

export function recallAtK(found: number[][], truth: number[][]): number {
  let hit = 0;
  let total = 0;
  for (let q = 0; q < truth.length; q++) {
    const t = new Set(truth[q]);
    for (const id of found[q]) if (t.has(id)) hit++;
    total += truth[q].length;
  }
  return hit / total;
}

/**
 * Vectors shaped more like image embeddings than isotropic clusters: cluster centres plus variation
 * along a few shared directions with decaying strength (low intrinsic dimension), plus a little
 * isotropic noise; unit length.
 */
export function embeddingLikeVectors(n: number, d: number, clusters: number, seed = 1, directions = 32): Float32Array {
  const rand = rng(seed);
  const centres = randomUnitRows(rand, clusters, d);
  const basis = randomUnitRows(rand, directions, d);
  const strength = Array.from({ length: directions }, (_, j) => 0.45 / Math.sqrt(j + 1));
  const isotropic = 0.1 / Math.sqrt(d);
  const out = new Float32Array(n * d);
  const coef = new Float32Array(directions);
  for (let i = 0; i < n; i++) {
    const c = Math.floor(rand() * clusters);
    const row = out.subarray(i * d, (i + 1) * d);
    for (let j = 0; j < d; j++) row[j] = centres[c * d + j] + isotropic * gaussian(rand);
    for (let b = 0; b < directions; b++) coef[b] = strength[b] * gaussian(rand);
    for (let b = 0; b < directions; b++) {
      const w = coef[b];
      const base = b * d;
      for (let j = 0; j < d; j++) row[j] += w * basis[base + j];
    }
  }
  return normalizeRows(out, d);
}
