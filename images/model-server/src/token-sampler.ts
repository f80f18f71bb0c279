import { FIRST_CONTENT_TOKEN, MODEL_DIMS, SPECIAL_TOKENS } from './model-spec.js';
import { mulberry32 } from '../../service-kit/src/random.js';

export interface SamplingParams {
  /** 0 = greedy (argmax). */
  temperature: number;
  topP: number;
  /** Same seed and params → same tokens. Absent: a random seed. */
  seed?: number;
  /** OpenAI's penalties (-2..2): a token's logit is lowered by presence once it was generated, and by frequency × how often. */
  presencePenalty?: number;
  frequencyPenalty?: number;
}

// Module-local copies: in the worker thread these modules are compiled to CommonJS, where every use
// of an imported binding is a property read through a getter (measurable in a loop over the vocabulary).
const V = MODEL_DIMS.vocabSize;
const EOS = SPECIAL_TOKENS.EOS;
const FIRST_CONTENT = FIRST_CONTENT_TOKEN;

/**
 * Picks the next token from one row of logits: greedy, or temperature + nucleus (top_p) sampling. Only
 * EOS and content ids may be generated; PAD, BOS, UNK and role markers never are.
 */
export class TokenSampler {
  private readonly random: () => number;
  /** How often each content token was generated so far (for the penalties). */
  private readonly generated = new Map<number, number>();
  private readonly penalised: boolean;
  private scratch: Float32Array | undefined;

  constructor(readonly params: SamplingParams) {
    this.random = mulberry32(params.seed ?? Math.floor(Math.random() * 2 ** 32));
    this.penalised = (params.presencePenalty ?? 0) !== 0 || (params.frequencyPenalty ?? 0) !== 0;
  }

  sample(logits: Float32Array, offset = 0): number {
    if (!this.penalised) return this.pick(logits, offset);
    // The row with the penalties applied, in a buffer of this sequence's own (the caller's row is shared).
    const row = (this.scratch ??= new Float32Array(V));
    row.set(logits.subarray(offset, offset + V));
    for (const [id, count] of this.generated) row[id]! -= (this.params.presencePenalty ?? 0) + (this.params.frequencyPenalty ?? 0) * count;
    const id = this.pick(row, 0);
    if (id !== EOS) this.generated.set(id, (this.generated.get(id) ?? 0) + 1);
    return id;
  }

  private pick(logits: Float32Array, offset: number): number {
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

/** The log-probability of a generated token and the most likely alternatives, over the tokens a model may generate. */
export interface TokenLogprobs {
  logprob: number;
  /** Pairs: id, log-probability; most likely first. */
  top: number[];
}

/**
 * Log-probabilities from one row of raw logits (before temperature and top_p, as OpenAI and vLLM
 * report them), normalised over EOS and the content ids (the only ids the sampler may pick).
 */
export function tokenLogprobs(logits: Float32Array, offset: number, token: number, topCount: number): TokenLogprobs {
  let max = logits[offset + EOS]!;
  for (let id = FIRST_CONTENT; id < V; id++) if (logits[offset + id]! > max) max = logits[offset + id]!;
  let sum = Math.exp(logits[offset + EOS]! - max);
  for (let id = FIRST_CONTENT; id < V; id++) sum += Math.exp(logits[offset + id]! - max);
  const logZ = max + Math.log(sum);
  const top: number[] = [];
  if (topCount > 0) {
    // A partial selection: topCount (at most 20) passes keep the best ids seen, in order.
    const best: Array<{ id: number; v: number }> = [];
    const consider = (id: number) => {
      const v = logits[offset + id]!;
      if (best.length === topCount && v <= best[best.length - 1]!.v) return;
      let at = best.length;
      while (at > 0 && best[at - 1]!.v < v) at--;
      best.splice(at, 0, { id, v });
      if (best.length > topCount) best.pop();
    };
    consider(EOS);
    for (let id = FIRST_CONTENT; id < V; id++) consider(id);
    for (const b of best) top.push(b.id, b.v - logZ);
  }
  return { logprob: logits[offset + token]! - logZ, top };
}
