import { SPECIAL_TOKENS } from './model-spec.js';
import type { TokenLogprobs } from './token-sampler.js';
import { ID_TOKENIZER, type ModelTokenizer } from './tokenizer.js';

/** One entry of OpenAI's `logprobs.content`. */
export interface LogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/** How an alternative that ends the answer is named in top_logprobs (it never appears in the content). */
const EOS_TEXT = '<|eos|>';

/**
 * The growing text of one choice (each generated id's text, from the model's tokenizer) with OpenAI
 * `stop` semantics: the text ends right before the first stop string, which is never returned. For
 * streaming, text that might still turn out to be the start of a stop string is held back until it
 * cannot. With log-probabilities, each token's entry is released with the text it starts in.
 */
export class ChoiceText {
  readonly ids: number[] = [];
  text = '';
  stopped = false;
  private emitted = 0;
  /** The whole text so far, before any stop string cut. */
  private full = '';
  /** Log-probability entries with the offset where each token's text starts; `released` of them handed out. */
  private readonly entries: Array<{ start: number; entry: LogprobEntry }> = [];
  private released = 0;

  constructor(
    private readonly stops: readonly string[],
    private readonly tokenizer: ModelTokenizer = ID_TOKENIZER,
  ) {}

  /** Append a generated id; true when a stop string now occurs (the text is cut before it). */
  push(id: number, logprobs?: TokenLogprobs): boolean {
    const first = this.ids.length === 0;
    this.ids.push(id);
    const piece = this.tokenizer.tokenText(id, first);
    if (logprobs) this.entries.push({ start: this.full.length, entry: this.entry(piece, logprobs, first) });
    this.full += piece;
    const text = this.full;
    let cut = -1;
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) {
      this.text = text.slice(0, cut);
      this.stopped = true;
      return true;
    }
    this.text = text;
    return false;
  }

  /** New text that is safe to stream; `final` releases everything still held back. */
  takeDelta(final = false): string {
    const safe = final || this.stopped ? this.text.length : this.text.length - this.heldBack();
    if (safe <= this.emitted) return '';
    const delta = this.text.slice(this.emitted, safe);
    this.emitted = safe;
    return delta;
  }

  /**
   * Entries of the tokens whose text has started in what takeDelta handed out and were not taken yet;
   * `final` takes those of the whole answer. A token that a stop string cuts counts if any of its text
   * is in the answer; one wholly after the cut never does.
   */
  takeLogprobs(final = false): LogprobEntry[] {
    const limit = final ? this.text.length : this.emitted;
    const out: LogprobEntry[] = [];
    while (this.released < this.entries.length && this.entries[this.released]!.start < limit) out.push(this.entries[this.released++]!.entry);
    return out;
  }

  /** Every entry of the answer (non-streamed responses). */
  get logprobs(): LogprobEntry[] {
    return this.entries.filter((e) => e.start < this.text.length).map((e) => e.entry);
  }

  private entry(piece: string, logprobs: TokenLogprobs, first: boolean): LogprobEntry {
    const top: LogprobEntry['top_logprobs'] = [];
    for (let i = 0; i < logprobs.top.length; i += 2) {
      const id = logprobs.top[i]!;
      const token = id === SPECIAL_TOKENS.EOS ? EOS_TEXT : this.tokenizer.tokenText(id, first);
      top.push({ token, logprob: logprobs.top[i + 1]!, bytes: bytesOf(token) });
    }
    return { token: piece, logprob: logprobs.logprob, bytes: bytesOf(piece), top_logprobs: top };
  }

  /** Length of the longest tail of the text that is a proper prefix of some stop string. */
  private heldBack(): number {
    let longest = 0;
    for (const stop of this.stops) {
      for (let k = Math.min(stop.length - 1, this.text.length); k > longest; k--) {
        if (this.text.endsWith(stop.slice(0, k))) {
          longest = k;
          break;
        }
      }
    }
    return longest;
  }
}

function bytesOf(text: string): number[] {
  return [...Buffer.from(text, 'utf8')];
}
