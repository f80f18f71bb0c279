import { mulberry32 } from '../../images/service-kit/src/random.js';
import { CONTENT_TOKEN_COUNT, FIRST_CONTENT_TOKEN, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import type { TrainingBatch } from './training-step.js';

/**
 * The training task: the prompt is one user message of random content tokens, the answer is the same
 * tokens in the same order (copy). The encoder sees [USER, x1..xn, EOS] (exactly what the server's
 * tokenizer makes of a user message "x1 ... xn"); the decoder learns [BOS, x1..xn] → [x1..xn, EOS].
 */
export type Task = 'copy' | 'reverse';

export { mulberry32 };

export interface Example {
  content: number[];
}

export function randomExample(rand: () => number, minLen: number, maxLen: number): Example {
  const n = minLen + Math.floor(rand() * (maxLen - minLen + 1));
  return randomExampleOfLength(rand, n);
}

export function randomExampleOfLength(rand: () => number, n: number): Example {
  return { content: Array.from({ length: n }, () => FIRST_CONTENT_TOKEN + Math.floor(rand() * CONTENT_TOKEN_COUNT)) };
}

export function expectedAnswer(task: Task, content: readonly number[]): number[] {
  return task === 'copy' ? [...content] : [...content].reverse();
}

export const keyOf = (e: Example) => e.content.join(' ');

export type Batch = TrainingBatch;

export function makeBatch(task: Task, examples: readonly Example[]): Batch {
  const sourceLen = Math.max(...examples.map((e) => e.content.length)) + 2;
  const targetLen = sourceLen - 1;
  const size = examples.length;
  const source = new Int32Array(size * sourceLen);
  const targetIn = new Int32Array(size * targetLen);
  const targetOut = new Int32Array(size * targetLen);
  examples.forEach((e, b) => {
    const answer = expectedAnswer(task, e.content);
    [SPECIAL_TOKENS.USER, ...e.content, SPECIAL_TOKENS.EOS].forEach((id, i) => (source[b * sourceLen + i] = id));
    [SPECIAL_TOKENS.BOS, ...answer].forEach((id, i) => (targetIn[b * targetLen + i] = id));
    [...answer, SPECIAL_TOKENS.EOS].forEach((id, i) => (targetOut[b * targetLen + i] = id));
  });
  return { source, sourceLen, targetIn, targetOut, targetLen, size };
}
