import { CONTENT_TOKEN_COUNT, FIRST_CONTENT_TOKEN, SPECIAL_TOKENS } from './model-spec.js';

/**
 * A byte-pair-encoding subword tokenizer over characters (as GPT-2's, without the byte layer): text is
 * cut into units (a word with the space before it, a number, a run of punctuation, a newline), each
 * unit starts as its characters and the learned merges join adjacent pieces, lowest rank first.
 * Content ids 10..999 are the pieces; a character never seen in training is UNK.
 */
export interface BpeTokenizerFile {
  type: 'bpe';
  /** Piece text of content id FIRST_CONTENT_TOKEN + i. */
  pieces: string[];
  /** Merges in rank order: [left, right] pieces joined into left + right. */
  merges: Array<[string, string]>;
  /** 'last-user': the model reads only the last user message of a chat (what it was trained on). */
  prompt?: 'last-user';
}

const UNIT = / ?\p{L}+(?:['’]\p{L}+)*| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\n/gu;
/** Encoded units kept for reuse; prompts repeat words, and a bounded cache keeps memory flat. */
const CACHE_LIMIT = 20_000;

/** The units BPE works within: spaces and tabs fold into the space a unit starts with; newlines are units. */
export function splitUnits(text: string): string[] {
  return normalize(text).match(UNIT) ?? [];
}

function normalize(text: string): string {
  return text.replace(/\r\n?/g, '\n').replace(/[^\S\n]+/g, ' ');
}

export class BpeTokenizer {
  private readonly ids = new Map<string, number>();
  private readonly ranks = new Map<string, number>();
  private readonly cache = new Map<string, number[]>();

  readonly lastUserMessageOnly: boolean;

  constructor(readonly file: BpeTokenizerFile) {
    this.lastUserMessageOnly = file.prompt === 'last-user';
    if (file.type !== 'bpe' || file.pieces.length > CONTENT_TOKEN_COUNT) throw new Error(`not a BPE tokenizer of at most ${CONTENT_TOKEN_COUNT} pieces`);
    file.pieces.forEach((piece, i) => this.ids.set(piece, FIRST_CONTENT_TOKEN + i));
    file.merges.forEach(([a, b], rank) => this.ranks.set(pairKey(a, b), rank));
  }

  /** Content ids of a text; with a limit, stops once more than `limit` ids are out (the rest cannot matter). */
  encode(text: string, limit = Number.POSITIVE_INFINITY): number[] {
    const out: number[] = [];
    const units = new RegExp(UNIT);
    const normalized = normalize(text);
    for (let m = units.exec(normalized); m && out.length <= limit; m = units.exec(normalized)) {
      for (const id of this.encodeUnit(m[0])) out.push(id);
    }
    return out;
  }

  /** The text of one content id ('' for any other id). */
  piece(id: number): string {
    return this.file.pieces[id - FIRST_CONTENT_TOKEN] ?? '';
  }

  /** The text a generated id adds to the answer (an answer does not start with a space). */
  tokenText(id: number, first: boolean): string {
    const piece = this.piece(id);
    return first ? piece.replace(/^ /, '') : piece;
  }

  decode(ids: readonly number[]): string {
    return ids
      .map((id) => this.piece(id))
      .join('')
      .replace(/^ /, '');
  }

  private encodeUnit(unit: string): number[] {
    const cached = this.cache.get(unit);
    if (cached) return cached;
    const pieces = mergeUnit([...unit], this.ranks);
    const ids = pieces.map((p) => this.ids.get(p) ?? SPECIAL_TOKENS.UNK);
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(unit, ids);
    return ids;
  }
}

/** Apply the merges to one unit's pieces, lowest rank first, until none applies. */
export function mergeUnit(pieces: string[], ranks: ReadonlyMap<string, number>): string[] {
  for (;;) {
    let best = -1;
    let bestRank = Number.POSITIVE_INFINITY;
    for (let i = 0; i + 1 < pieces.length; i++) {
      const rank = ranks.get(pairKey(pieces[i]!, pieces[i + 1]!));
      if (rank !== undefined && rank < bestRank) {
        bestRank = rank;
        best = i;
      }
    }
    if (best < 0) return pieces;
    pieces.splice(best, 2, pieces[best]! + pieces[best + 1]!);
  }
}

export function pairKey(a: string, b: string): string {
  return `${a}\u0000${b}`;
}

/**
 * Learn a tokenizer from a corpus: every character seen at least `minCharCount` times is a piece,
 * then the most frequent adjacent pair is merged (ties broken by the pair's text, so the result is
 * the same on every run) until there are `size` pieces.
 */
export function trainBpe(corpus: string, size = CONTENT_TOKEN_COUNT, minCharCount = 2): BpeTokenizerFile {
  const unitCounts = new Map<string, number>();
  for (const unit of splitUnits(corpus)) unitCounts.set(unit, (unitCounts.get(unit) ?? 0) + 1);
  const charCounts = new Map<string, number>();
  for (const [unit, n] of unitCounts) for (const ch of unit) charCounts.set(ch, (charCounts.get(ch) ?? 0) + n);
  const pieces = [...charCounts]
    .filter(([, n]) => n >= minCharCount)
    .map(([ch]) => ch)
    .sort();
  const known = new Set(pieces);
  // Each distinct unit as its current pieces; units with an unknown character keep it as a piece of its own.
  const words = [...unitCounts].map(([unit, count]) => ({ parts: [...unit], count }));
  const merges: Array<[string, string]> = [];
  // Pair counts are kept up to date as merges change the words that contain them.
  const pairs = new Map<string, number>();
  const count = (w: { parts: string[]; count: number }, sign: 1 | -1) => {
    for (let i = 0; i + 1 < w.parts.length; i++) {
      if (!known.has(w.parts[i]!) || !known.has(w.parts[i + 1]!)) continue;
      const key = pairKey(w.parts[i]!, w.parts[i + 1]!);
      pairs.set(key, (pairs.get(key) ?? 0) + sign * w.count);
    }
  };
  for (const w of words) count(w, 1);
  while (pieces.length < size) {
    let bestKey = '';
    let bestCount = 1; // a pair seen once is not worth a piece
    for (const [key, n] of pairs) if (n > bestCount || (n === bestCount && bestKey !== '' && key < bestKey)) [bestKey, bestCount] = [key, n];
    if (!bestKey) break;
    const [a, b] = bestKey.split('\u0000') as [string, string];
    merges.push([a, b]);
    // Two merge paths can build the same text ("th"+"e", "t"+"he"): it is one piece.
    if (!known.has(a + b)) pieces.push(a + b);
    known.add(a + b);
    for (const w of words) {
      if (!w.parts.includes(a) || !w.parts.includes(b)) continue;
      count(w, -1);
      for (let i = 0; i + 1 < w.parts.length; i++) if (w.parts[i] === a && w.parts[i + 1] === b) w.parts.splice(i, 2, a + b);
      count(w, 1);
    }
    pairs.delete(bestKey);
  }
  return { type: 'bpe', pieces, merges };
}
