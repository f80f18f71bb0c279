import { detokenize } from './tokenizer.js';

/**
 * The growing text of one choice (generated ids joined by spaces) with OpenAI `stop` semantics: the
 * text ends right before the first stop string, which is never returned. For streaming, text that
 * might still turn out to be the start of a stop string is held back until it cannot.
 */
export class ChoiceText {
  readonly ids: number[] = [];
  text = '';
  stopped = false;
  private emitted = 0;
  /** The whole text so far, before any stop string cut. */
  private full = '';

  constructor(private readonly stops: readonly string[]) {}

  /** Append a generated id; true when a stop string now occurs (the text is cut before it). */
  push(id: number): boolean {
    this.ids.push(id);
    // What detokenize(this.ids) gives, one id appended (not the whole text rebuilt per token).
    this.full = this.ids.length === 1 ? detokenize(this.ids) : `${this.full} ${detokenize([id])}`;
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
