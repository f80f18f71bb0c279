// CLIP's byte-level BPE tokenizer (a port of openai/CLIP simple_tokenizer.py, without ftfy).
// The vocabulary comes from the model directory: `merges.txt` (one "a b" merge per line, an optional
// "#version" header) and `vocab.json` (token → id). Without vocab.json the ids are derived the way
// CLIP does: 256 byte tokens, the same with "</w>", one token per merge, then the two special tokens.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const CONTEXT_LENGTH = 77;
export const START_TOKEN = '<|startoftext|>';
export const END_TOKEN = '<|endoftext|>';

/** GPT-2/CLIP mapping of the 256 byte values onto printable unicode characters. */
export function bytesToUnicode(): string[] {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const table: string[] = new Array(256);
  bs.forEach((b, i) => (table[b] = String.fromCodePoint(cs[i])));
  return table;
}

const PATTERN = /<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+/giu;

/** CLIP's text clean-up: unescape HTML entities, collapse whitespace, lower-case. */
export function cleanText(text: string): string {
  const unescaped = text
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');
  return unescaped.replace(/\s+/g, ' ').trim().toLowerCase();
}

/** The base vocabulary every CLIP-style BPE vocab starts with: byte tokens, then byte tokens + "</w>". */
export function baseVocabulary(): string[] {
  const bytes = bytesToUnicode();
  return [...bytes, ...bytes.map((b) => b + '</w>')];
}

export class ClipTokenizer {
  private readonly byteEncoder = bytesToUnicode();
  private readonly ranks = new Map<string, number>();
  private readonly cache = new Map<string, string[]>();
  readonly sot: number;
  readonly eot: number;

  constructor(
    merges: Array<[string, string]>,
    private readonly vocab: Map<string, number>,
  ) {
    merges.forEach(([a, b], i) => this.ranks.set(`${a} ${b}`, i));
    const sot = vocab.get(START_TOKEN);
    const eot = vocab.get(END_TOKEN);
    if (sot === undefined || eot === undefined) throw new Error(`vocabulary lacks ${START_TOKEN} or ${END_TOKEN}`);
    this.sot = sot;
    this.eot = eot;
  }

  /** Load `merges.txt` (+ `vocab.json` when present) from a model directory. */
  static fromDirectory(dir: string): ClipTokenizer {
    const mergesFile = path.join(dir, 'merges.txt');
    const vocabFile = path.join(dir, 'vocab.json');
    let merges = parseMerges(readFileSync(mergesFile, 'utf8'));
    // OpenAI's bpe_simple_vocab_16e6.txt holds more merges than CLIP uses (49152 - 256 - 2).
    if (!existsSync(vocabFile)) merges = merges.slice(0, 49152 - 256 - 2);
    const vocab = existsSync(vocabFile)
      ? new Map(Object.entries(JSON.parse(readFileSync(vocabFile, 'utf8')) as Record<string, number>))
      : derivedVocabulary(merges);
    return new ClipTokenizer(merges, vocab);
  }

  get vocabularySize(): number {
    return this.vocab.size;
  }

  /** BPE of one pre-token (already mapped to byte characters); returns its sub-word tokens. */
  bpe(token: string): string[] {
    const cached = this.cache.get(token);
    if (cached) return cached;
    const chars = Array.from(token);
    let word = [...chars.slice(0, -1), chars[chars.length - 1] + '</w>'];
    while (word.length > 1) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i < word.length - 1; i++) {
        const rank = this.ranks.get(`${word[i]} ${word[i + 1]}`);
        if (rank !== undefined && rank < bestRank) {
          bestRank = rank;
          best = i;
        }
      }
      if (best < 0) break;
      const [first, second] = [word[best], word[best + 1]];
      const merged: string[] = [];
      for (let i = 0; i < word.length; i++) {
        if (i < word.length - 1 && word[i] === first && word[i + 1] === second) {
          merged.push(first + second);
          i++;
        } else merged.push(word[i]);
      }
      word = merged;
    }
    if (this.cache.size < 10_000) this.cache.set(token, word);
    return word;
  }

  /** Sub-word token strings of a text (no special tokens). */
  pieces(text: string): string[] {
    const out: string[] = [];
    for (const match of cleanText(text).matchAll(PATTERN)) {
      const mapped = Array.from(Buffer.from(match[0], 'utf8'), (b) => this.byteEncoder[b]).join('');
      out.push(...this.bpe(mapped));
    }
    return out;
  }

  encode(text: string): number[] {
    return this.pieces(text).map((piece) => {
      const id = this.vocab.get(piece);
      if (id === undefined) throw new Error(`token "${piece}" is not in the vocabulary (vocab.json and merges.txt disagree)`);
      return id;
    });
  }

  /** CLIP's tokenize(): SOT + tokens + EOT, truncated (EOT kept last) and zero-padded to the context. */
  tokenize(texts: string[], contextLength = CONTEXT_LENGTH): BigInt64Array {
    const out = new BigInt64Array(texts.length * contextLength);
    texts.forEach((text, row) => {
      let ids = [this.sot, ...this.encode(text), this.eot];
      if (ids.length > contextLength) {
        ids = ids.slice(0, contextLength);
        ids[contextLength - 1] = this.eot;
      }
      ids.forEach((id, j) => (out[row * contextLength + j] = BigInt(id)));
    });
    return out;
  }
}

export function parseMerges(text: string): Array<[string, string]> {
  return text
    .split('\n')
    .filter((line) => line.trim() && !line.startsWith('#version'))
    .map((line) => {
      const [a, b] = line.split(' ');
      if (!a || !b) throw new Error(`bad merge line: ${JSON.stringify(line)}`);
      return [a, b];
    });
}

function derivedVocabulary(merges: Array<[string, string]>): Map<string, number> {
  const tokens = [...baseVocabulary(), ...merges.map(([a, b]) => a + b), START_TOKEN, END_TOKEN];
  return new Map(tokens.map((t, i) => [t, i]));
}
