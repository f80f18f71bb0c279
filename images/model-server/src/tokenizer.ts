import { FIRST_CONTENT_TOKEN, CONTENT_TOKEN_COUNT, MODEL_DIMS, SPECIAL_TOKENS } from './model-spec.js';

/** The roles a chat message may have, and the marker token that introduces each in the prompt. */
export const ROLE_TOKENS = {
  system: SPECIAL_TOKENS.SYSTEM,
  developer: SPECIAL_TOKENS.DEVELOPER,
  user: SPECIAL_TOKENS.USER,
  assistant: SPECIAL_TOKENS.ASSISTANT,
  tool: SPECIAL_TOKENS.TOOL,
} as const;

export type ChatRole = keyof typeof ROLE_TOKENS;

export interface ChatMessageText {
  role: ChatRole;
  content: string;
}

/**
 * Text to content token ids. Each whitespace-separated word that is an integer in the content range
 * (10..999) is that id; any other word is hashed (FNV-1a) into the content range, so every prompt
 * tokenizes and equal words always get equal ids.
 */
export function tokenizeText(text: string, limit = Number.POSITIVE_INFINITY): number[] {
  const ids: number[] = [];
  const words = /\S+/g;
  for (let m = words.exec(text); m && ids.length <= limit; m = words.exec(text)) {
    const word = m[0];
    if (/^\d+$/.test(word)) {
      const n = Number(word);
      if (n >= FIRST_CONTENT_TOKEN && n < MODEL_DIMS.vocabSize) {
        ids.push(n);
        continue;
      }
    }
    ids.push(FIRST_CONTENT_TOKEN + (fnv1a(word) % CONTENT_TOKEN_COUNT));
  }
  return ids;
}

/** How a model turns text into content ids and generated ids back into text. */
export interface ModelTokenizer {
  /** Content ids of a message's text; with a limit, it may stop once more than `limit` ids are out. */
  encode(text: string, limit?: number): number[];
  /** The text one generated id adds to the answer; `first` when it starts the answer. */
  tokenText(id: number, first: boolean): string;
  /** The model reads only the last user message of a chat (as it was trained); otherwise every message. */
  readonly lastUserMessageOnly?: boolean;
}

/** strata-tiny's contract: integers are ids, other words hashed; the answer is the ids joined by single spaces. */
export const ID_TOKENIZER: ModelTokenizer = {
  encode: tokenizeText,
  tokenText: (id, first) => (first ? String(id) : ` ${id}`),
};

/**
 * The encoder prompt: every message as its role marker followed by its text's ids, then EOS. Built by
 * appending one id at a time: a prompt of any size (the body limit allows ~1 MB) never becomes a
 * function call's argument list. With a limit, encoding stops once the prompt is longer than that
 * (the result is then cut short: only its length past the limit matters). A model that reads only
 * the last user message gets that message alone.
 */
export function encodeChat(messages: readonly ChatMessageText[], tokenizer: ModelTokenizer = ID_TOKENIZER, limit = Number.POSITIVE_INFINITY): number[] {
  const ids: number[] = [];
  const read = tokenizer.lastUserMessageOnly ? messages.filter((m) => m.role === 'user').slice(-1) : messages;
  for (const m of read) {
    if (ids.length > limit) return ids;
    ids.push(ROLE_TOKENS[m.role]);
    for (const id of tokenizer.encode(m.content, limit - ids.length)) ids.push(id);
  }
  ids.push(SPECIAL_TOKENS.EOS);
  return ids;
}

/**
 * The characters one prompt token is taken to span at most, with the whitespace before it: the window
 * of a text's tail that encodeChatTail tokenizes. Words and BPE pieces are far shorter.
 */
export const MAX_TOKEN_CHARS = 64;

/**
 * The last `maxTokens` ids of encodeChat's prompt (the prompt a truncating server keeps), at a cost
 * bounded by `maxTokens`, not by the size of the messages: messages are read from the last one back
 * until the prompt is full, and each text is first cut to its last (tokens still wanted) ×
 * MAX_TOKEN_CHARS characters, at a whitespace where that window has one, so a word is not split.
 * Only a text whose tail is padded with long runs of whitespace or words longer than MAX_TOKEN_CHARS
 * gets a different (shorter-reaching) tail than the whole text would give.
 */
export function encodeChatTail(messages: readonly ChatMessageText[], tokenizer: ModelTokenizer, maxTokens: number): number[] {
  const read = tokenizer.lastUserMessageOnly ? messages.filter((m) => m.role === 'user').slice(-1) : messages;
  // The prompt's pieces from its end back: EOS, then each message's text ids and its role marker.
  const backwards: number[][] = [[SPECIAL_TOKENS.EOS]];
  let count = 1;
  for (let i = read.length - 1; i >= 0 && count < maxTokens; i--) {
    const m = read[i]!;
    const ids = tokenizer.encode(textTail(m.content, (maxTokens - count) * MAX_TOKEN_CHARS));
    backwards.push(ids, [ROLE_TOKENS[m.role]]);
    count += ids.length + 1;
  }
  const prompt: number[] = [];
  for (let i = backwards.length - 1; i >= 0; i--) for (const id of backwards[i]!) prompt.push(id);
  return prompt.length > maxTokens ? prompt.slice(prompt.length - maxTokens) : prompt;
}

/** The last `chars` characters of `text`, from the first whitespace in them if there is one. */
function textTail(text: string, chars: number): string {
  if (text.length <= chars) return text;
  const window = text.slice(text.length - chars);
  const space = window.search(/\s/);
  return space < 0 ? window : window.slice(space);
}

/** Generated ids to the response text: the ids joined by single spaces. */
export function detokenize(ids: readonly number[]): string {
  return ids.join(' ');
}

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}
