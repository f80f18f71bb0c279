import { readFile } from 'node:fs/promises';
import { BpeTokenizer } from '../../images/model-server/src/bpe-tokenizer.js';
import { MAX_PROMPT_TOKENS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { encodeChat } from '../../images/model-server/src/tokenizer.js';
import { buildPoemMessages } from '../../images/poem-app/src/poet.js';
import { POEM_TYPES } from '../../images/poem-app/src/poem-types.js';
import type { TrainingBatch } from './training-step.js';

/**
 * The verse corpus: the songs and poems file of Debian's `fortunes` package (BSD-licensed, see
 * /usr/share/doc/fortunes/copyright), installed with `apt-get install fortunes`.
 */
export const DEFAULT_CORPUS = '/usr/share/games/fortunes/songs-poems';

/** Most answer tokens per example (EOS excluded): a stanza, or a run of its lines. */
export const MAX_ANSWER_TOKENS = 32;

/**
 * The corpus as stanzas: fortunes are separated by `%` lines, stanzas by blank lines; attribution
 * lines (`-- Author`) and lines of indentation only are dropped.
 */
export async function readStanzas(file: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the verse corpus ${file} (install it with: apt-get install fortunes): ${(err as Error).message}`, { cause: err });
  }
  const stanzas: string[] = [];
  for (const fortune of text.split(/^%$/m)) {
    for (const block of fortune.split(/\n\s*\n/)) {
      const lines = block
        .split('\n')
        .map((l) => l.replace(/\s+/g, ' ').trim())
        .filter((l) => l && !/^--/.test(l));
      if (lines.length >= 2) stanzas.push(lines.join('\n'));
    }
  }
  return stanzas;
}

/** The words of a text, lower-cased: runs of letters, apostrophes inside a word kept ("o'er", "don't"). */
export function verseWords(text: string): string[] {
  return (text.match(/\p{L}+(?:'\p{L}+)*/gu) ?? []).map((w) => w.toLowerCase());
}

/** The distinct words of the corpus, sorted: what a model trained on it can be checked against. */
export function corpusWordList(stanzas: readonly string[]): string {
  return [...new Set(stanzas.flatMap(verseWords))].sort().join('\n') + '\n';
}

export interface VerseExample {
  /** Encoder ids: the poem app's request for a poem on a theme from the answer, as the server encodes it (its last user message). */
  source: number[];
  /** The answer's ids (without EOS). */
  answer: number[];
}

/**
 * Examples from stanzas: each stanza is cut into runs of whole lines of at most MAX_ANSWER_TOKENS
 * tokens (newlines kept), and each run is the answer to the poem app's own request for a random form
 * on a theme word taken from that run, encoded as the server encodes it for this model (the last user
 * message: the tokenizer says so), so that the served prompt is what the model saw in training.
 */
export function makeExamples(stanzas: readonly string[], tokenizer: BpeTokenizer, rand: () => number): VerseExample[] {
  const examples: VerseExample[] = [];
  for (const stanza of stanzas) {
    let lines: string[] = [];
    const flush = () => {
      if (lines.length === 0) return;
      const text = lines.join('\n');
      const answer = tokenizer.encode(text).slice(0, MAX_ANSWER_TOKENS);
      const words = text.match(/\p{L}{4,}/gu) ?? ['verse'];
      const theme = words[Math.floor(rand() * words.length)]!.toLowerCase();
      const type = POEM_TYPES[Math.floor(rand() * POEM_TYPES.length)]!;
      const prompt = encodeChat(
        buildPoemMessages(type, theme).map((m) => ({ role: m.role as 'system' | 'user', content: String(m.content) })),
        tokenizer,
      );
      if (prompt.length <= MAX_PROMPT_TOKENS) examples.push({ source: prompt, answer });
      lines = [];
    };
    for (const line of stanza.split('\n')) {
      const candidate = [...lines, line].join('\n');
      if (lines.length > 0 && tokenizer.encode(candidate).length > MAX_ANSWER_TOKENS) flush();
      lines.push(line);
    }
    flush();
  }
  return examples;
}

/** PAD-padded tensors: decoder input BOS + answer, labels answer + EOS. */
export function makeVerseBatch(examples: readonly VerseExample[]): TrainingBatch {
  const sourceLen = Math.max(...examples.map((e) => e.source.length));
  const targetLen = Math.max(...examples.map((e) => e.answer.length)) + 1;
  const size = examples.length;
  const source = new Int32Array(size * sourceLen);
  const targetIn = new Int32Array(size * targetLen);
  const targetOut = new Int32Array(size * targetLen);
  examples.forEach((e, b) => {
    e.source.forEach((id, i) => (source[b * sourceLen + i] = id));
    [SPECIAL_TOKENS.BOS, ...e.answer].forEach((id, i) => (targetIn[b * targetLen + i] = id));
    [...e.answer, SPECIAL_TOKENS.EOS].forEach((id, i) => (targetOut[b * targetLen + i] = id));
  });
  return { source, sourceLen, targetIn, targetOut, targetLen, size };
}

/**
 * The baseline a model must beat: each answer token (EOS included) predicted by its frequency in the
 * training answers (add-one smoothed over the 991 tokens a model may generate); returns the mean
 * negative log-likelihood per token on the held-out answers, in nats.
 */
export function unigramLoss(train: readonly VerseExample[], heldOut: readonly VerseExample[], generable: number): number {
  const counts = new Map<number, number>();
  let total = 0;
  for (const e of train)
    for (const id of [...e.answer, SPECIAL_TOKENS.EOS]) {
      counts.set(id, (counts.get(id) ?? 0) + 1);
      total++;
    }
  let nll = 0;
  let n = 0;
  for (const e of heldOut)
    for (const id of [...e.answer, SPECIAL_TOKENS.EOS]) {
      nll -= Math.log(((counts.get(id) ?? 0) + 1) / (total + generable));
      n++;
    }
  return nll / n;
}
