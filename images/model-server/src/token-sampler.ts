import { FIRST_CONTENT_TOKEN, MODEL_DIMS, SPECIAL_TOKENS } from './model-spec.js';
import { mulberry32 } from './random.js';

export interface SamplingParams {
  /** 0 = greedy (argmax). */
  temperature: number;
  topP: number;
  /** Same seed and params → same tokens. Absent: a random seed. */
  seed?: number;
}

// Module-local copies: in the worker thread these modules are compiled to CommonJS, where every use
// of an imported binding is a property read through a getter (measurable in a loop over the vocabulary).
const V = MODEL_DIMS.vocabSize;
const EOS = SPECIAL_TOKENS.EOS;
const FIRST_CONTENT = FIRST_CONTENT_TOKEN;

/** Picks the next token from one row of logits: greedy, or temperature + nucleus (top_p) sampling. Only EOS and content ids may be generated; PAD, BOS, UNK and role markers never are. */
export class TokenSampler {
  private readonly random: () => number;

  constructor(readonly params: SamplingParams) {
    this.random = mulberry32(params.seed ?? Math.floor(Math.random() * 2 ** 32));
  }

  sample(logits: Float32Array, offset = 0): number {
    let best: number = EOS;
    let max = logits[offset + EOS]!;
    for (let id = FIRST_CONTENT; id < V; id++) {
      const v = logits[offset + id]!;
      if (v > max) {
        max = v;
        best = id;
      }
    }
    if (this.params.temperature <= 1e-6) return best;
    const candidates: Array<{ id: number; p: number }> = [];
    let total = 0;
    for (let id = EOS; id < V; id++) {
      if (id > EOS && id < FIRST_CONTENT) continue;
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
