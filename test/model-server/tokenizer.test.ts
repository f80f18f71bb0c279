import { expect } from 'chai';
import { FIRST_CONTENT_TOKEN, MODEL_DIMS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { TokenSampler } from '../../images/model-server/src/token-sampler.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BpeTokenizer, type BpeTokenizerFile } from '../../images/model-server/src/bpe-tokenizer.js';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/served-models.js';
import {
  ID_TOKENIZER,
  ROLE_TOKENS,
  detokenize,
  encodeChat,
  encodeChatTail,
  tokenizeText,
  type ChatMessageText,
} from '../../images/model-server/src/tokenizer.js';

const V = MODEL_DIMS.vocabSize;
const isContent = (id: number) => Number.isInteger(id) && id >= FIRST_CONTENT_TOKEN && id < V;

describe('model-server tokenizer', () => {
  it('has the documented special tokens: PAD 0, BOS 1, EOS 2, UNK 3, role markers 4..8, 9 reserved, content 10..999', () => {
    expect(SPECIAL_TOKENS).to.deep.equal({ PAD: 0, BOS: 1, EOS: 2, UNK: 3, SYSTEM: 4, USER: 5, ASSISTANT: 6, TOOL: 7, DEVELOPER: 8, RESERVED: 9 });
    expect(ROLE_TOKENS).to.deep.equal({ system: 4, developer: 8, user: 5, assistant: 6, tool: 7 });
    expect(FIRST_CONTENT_TOKEN).to.equal(10);
    expect(V).to.equal(1000);
  });

  it('maps integers 10..999 to themselves and hashes every other word into the content range', () => {
    expect(tokenizeText('10 500 999')).to.deep.equal([10, 500, 999]);
    expect(tokenizeText('  10\n\t20  ')).to.deep.equal([10, 20]);
    expect(tokenizeText('')).to.deep.equal([]);
    // Special ids and out-of-range numbers cannot be injected as text: they are hashed like words.
    const hashed = tokenizeText('0 1 2 9 1000 -5 07x hello Hello héllo 🙂');
    expect(hashed).to.have.length(11);
    for (const id of hashed) expect(isContent(id), String(id)).to.equal(true);
    expect(tokenizeText('hello')).to.deep.equal(tokenizeText('hello'));
    expect(tokenizeText('hello')).to.not.deep.equal(tokenizeText('Hello'));
  });

  it('encodes a chat as role marker + words per message, then EOS', () => {
    expect(encodeChat([{ role: 'user', content: '10 20 30' }])).to.deep.equal([SPECIAL_TOKENS.USER, 10, 20, 30, SPECIAL_TOKENS.EOS]);
    const chat = encodeChat([
      { role: 'system', content: '11' },
      { role: 'developer', content: '12' },
      { role: 'user', content: '13' },
      { role: 'assistant', content: '' },
      { role: 'tool', content: '14 15' },
    ]);
    expect(chat).to.deep.equal([4, 11, 8, 12, 5, 13, 6, 7, 14, 15, 2]);
  });

  it('encodes the tail of a chat (what truncation keeps) as the whole encoding would, reading only the tail of a huge text', () => {
    const verse = new BpeTokenizer(JSON.parse(readFileSync(path.join(DEFAULT_MODEL_DIR, 'strata-verse', 'tokenizer.json'), 'utf8')) as BpeTokenizerFile);
    const words = (n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => (i % 3 === 0 ? `word${from + i}` : String(10 + ((from + i) % 990)))).join(from % 2 === 0 ? ' ' : ' \t ');
    const chats: ChatMessageText[][] = [
      [{ role: 'user', content: '10 20 30' }],
      [{ role: 'user', content: words(80) }],
      [
        { role: 'system', content: 'You write verse.\r\nShort lines,  please.' },
        { role: 'user', content: words(30) },
        { role: 'assistant', content: '' },
        { role: 'user', content: `${words(40, 7)}\n\nthe  tide is full,\tthe moon lies fair` },
      ],
      [{ role: 'user', content: words(200_000) }],
    ];
    for (const tokenizer of [ID_TOKENIZER, verse]) {
      for (const chat of chats) expect(encodeChatTail(chat, tokenizer, 64)).to.deep.equal(encodeChat(chat, tokenizer).slice(-64));
    }
    // Only the tail is read: what lies before it could be anything (here text the tokenizer would take long over).
    const huge = `${'x'.repeat(2_000_000)} ${words(100)}`;
    expect(encodeChatTail([{ role: 'user', content: huge }], verse, 64)).to.deep.equal(encodeChatTail([{ role: 'user', content: words(100) }], verse, 64));
  });

  it('detokenizes to the ids joined by single spaces', () => {
    expect(detokenize([10, 200, 999])).to.equal('10 200 999');
    expect(detokenize([])).to.equal('');
  });
});

describe('model-server token sampler', () => {
  /** Logits that favour `best`, with the special ids scored even higher (they must never be picked but EOS). */
  const logits = (best: number, spread = 1): Float32Array => {
    const row = new Float32Array(V);
    for (let id = 0; id < V; id++) row[id] = -Math.abs(id - best) * spread;
    for (const id of [SPECIAL_TOKENS.PAD, SPECIAL_TOKENS.BOS, SPECIAL_TOKENS.UNK, SPECIAL_TOKENS.USER, SPECIAL_TOKENS.RESERVED]) row[id] = 100;
    return row;
  };

  it('greedy (temperature 0) picks the best generable id; EOS may be generated, other specials never', () => {
    expect(new TokenSampler({ temperature: 0, topP: 1 }).sample(logits(500))).to.equal(500);
    const eos = logits(500);
    eos[SPECIAL_TOKENS.EOS] = 50;
    expect(new TokenSampler({ temperature: 0, topP: 1 }).sample(eos)).to.equal(SPECIAL_TOKENS.EOS);
    // Offset: row 1 of a [2, V] batch.
    const batch = new Float32Array(2 * V);
    batch.set(logits(20), 0);
    batch.set(logits(700), V);
    expect(new TokenSampler({ temperature: 0, topP: 1 }).sample(batch, V)).to.equal(700);
  });

  it('samples only generable ids at high temperature; a tiny top_p is greedy', () => {
    const sampler = new TokenSampler({ temperature: 2, topP: 1, seed: 3 });
    const seen = new Set<number>();
    for (let i = 0; i < 300; i++) seen.add(sampler.sample(logits(500, 0.05)));
    expect(seen.size).to.be.greaterThan(5);
    for (const id of seen) expect(isContent(id) || id === SPECIAL_TOKENS.EOS, String(id)).to.equal(true);
    const nucleus = new TokenSampler({ temperature: 2, topP: 1e-6, seed: 3 });
    for (let i = 0; i < 50; i++) expect(nucleus.sample(logits(500, 0.05))).to.equal(500);
  });

  it('top_p keeps sampling inside the nucleus', () => {
    // Probabilities ∝ e^(-|id-500|): ids 499..501 hold ~75% of the mass, 498..502 ~90%.
    const sampler = new TokenSampler({ temperature: 1, topP: 0.7, seed: 11 });
    for (let i = 0; i < 200; i++) expect(Math.abs(sampler.sample(logits(500)) - 500)).to.be.at.most(1);
  });

  it('penalties lower what was generated: presence once, frequency per time; the shared row is left as it was', () => {
    // Logits fall by 1 per id away from 500: 499 and 501 are 1 below 500, 498 and 502 are 2 below.
    const row = logits(500);
    const frequency = new TokenSampler({ temperature: 0, topP: 1, frequencyPenalty: 1.5 });
    // 500, then 499 (500 is now 1.5 lower), then 501 (499 is 1.5 lower too), ...
    expect(Array.from({ length: 3 }, () => frequency.sample(row))).to.deep.equal([500, 499, 501]);
    expect(row[500]).to.equal(0);
    const presence = new TokenSampler({ temperature: 0, topP: 1, presencePenalty: 0.5 });
    // A presence penalty of 0.5 never outweighs a 1-logit lead: greedy keeps 500.
    expect(Array.from({ length: 3 }, () => presence.sample(row))).to.deep.equal([500, 500, 500]);
    const repeatMore = new TokenSampler({ temperature: 0, topP: 1, frequencyPenalty: -2 });
    expect(Array.from({ length: 3 }, () => repeatMore.sample(row))).to.deep.equal([500, 500, 500]);
    const none = new TokenSampler({ temperature: 0, topP: 1 });
    expect(Array.from({ length: 3 }, () => none.sample(row))).to.deep.equal([500, 500, 500]);
  });

  it('the same seed gives the same sequence, another seed another one', () => {
    const draw = (seed: number) => {
      const s = new TokenSampler({ temperature: 1.5, topP: 0.95, seed });
      return Array.from({ length: 40 }, () => s.sample(logits(500, 0.05)));
    };
    expect(draw(42)).to.deep.equal(draw(42));
    expect(draw(42)).to.not.deep.equal(draw(43));
  });
});
