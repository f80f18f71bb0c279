import { FIRST_CONTENT_TOKEN, MODEL_DIMS, SPECIAL_TOKENS } from './model-spec.js';
import { mulberry32 } from './random.js';

export interface SamplingParams {
  /** 0 = greedy (argmax). */
  temperature: number;
  topP: number;
  /** Same seed and params → same tokens. Absent: a random seed. */
  seed?: number;
}

/** Only EOS and content ids may be generated; PAD, BOS, UNK and role markers never are. */
const isGenerable = (id: number) => id === SPECIAL_TOKENS.EOS || id >= FIRST_CONTENT_TOKEN;

/** Picks the next token from one row of logits: greedy, or temperature + nucleus (top_p) sampling. */
export class TokenSampler {
  private readonly random: () => number;

  constructor(readonly params: SamplingParams) {
    this.random = mulberry32(params.seed ?? Math.floor(Math.random() * 2 ** 32));
  }

  sample(logits: Float32Array, offset = 0): number {
    const V = MODEL_DIMS.vocabSize;
    let best = -1;
    let max = -Infinity;
    for (let id = 0; id < V; id++) {
      if (isGenerable(id) && logits[offset + id]! > max) {
        max = logits[offset + id]!;
        best = id;
      }
    }
    if (this.params.temperature <= 1e-6) return best;
    const candidates: Array<{ id: number; p: number }> = [];
    let total = 0;
    for (let id = 0; id < V; id++) {
      if (!isGenerable(id)) continue;
      const p = Math.exp((logits[offset + id]! - max) / this.params.temperature);
      candidates.push({ id, p });
      total += p;
    }
    candidates.sort((a, b) => b.p - a.p);
    // Nucleus: the smallest set of most likely tokens whose probability reaches top_p.
    let kept = 0;
    let mass = 0;
    while (kept < candidates.length && (kept === 0 || mass < this.params.topP * total)) mass += candidates[kept++]!.p;
    let r = this.random() * mass;
    for (let i = 0; i < kept; i++) {
      r -= candidates[i]!.p;
      if (r <= 0) return candidates[i]!.id;
    }
    return candidates[kept - 1]!.id;
  }
}
