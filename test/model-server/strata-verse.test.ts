import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { BpeTokenizer, trainBpe, type BpeTokenizerFile } from '../../images/model-server/src/bpe-tokenizer.js';
import { verseWords } from '../../hack/train/verse-corpus.js';
import { FIRST_CONTENT_TOKEN, MAX_OUTPUT_TOKENS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { DEFAULT_MODEL_DIR, GENERATION_CONFIG_FILE } from '../../images/model-server/src/served-models.js';
import { encodeChat } from '../../images/model-server/src/tokenizer.js';
import { loadPoemAppConfig } from '../../images/poem-app/src/config.js';
import { buildPoemMessages, buildPoemRequest } from '../../images/poem-app/src/poet.js';
import { verseLines } from '../../images/poem-app/src/poem-shape.js';
import { POEM_TYPES } from '../../images/poem-app/src/poem-types.js';
import { getJson, modelServerForSuite, postJson } from './helpers.js';

const VERSE_DIR = path.join(DEFAULT_MODEL_DIR, 'strata-verse');
const tokenizerFile = JSON.parse(readFileSync(path.join(VERSE_DIR, 'tokenizer.json'), 'utf8')) as BpeTokenizerFile;
const card = JSON.parse(readFileSync(path.join(VERSE_DIR, 'model-card.json'), 'utf8'));
const poemRequest = (theme: string) => buildPoemMessages(POEM_TYPES.find((t) => t.code === 'haiku')!, theme);

describe('strata-verse: the BPE tokenizer', () => {
  const tokenizer = new BpeTokenizer(tokenizerFile);

  it('has 990 pieces in the content ids and reads the last user message only', () => {
    expect(tokenizerFile.pieces).to.have.length(990);
    expect(new Set(tokenizerFile.pieces).size).to.equal(990);
    expect(tokenizerFile.prompt).to.equal('last-user');
  });

  it('round-trips verse, newlines included, with content ids only', () => {
    const verse = 'The sea is calm tonight,\nthe tide is full; the moon lies fair';
    const ids = tokenizer.encode(verse);
    for (const id of ids) expect(id).to.be.within(FIRST_CONTENT_TOKEN, 999);
    expect(ids.length).to.be.lessThan(verse.length / 2);
    expect(tokenizer.decode(ids)).to.equal(verse);
    // Characters never seen in training are UNK, never an error.
    expect(tokenizer.encode('☃')).to.deep.equal([SPECIAL_TOKENS.UNK]);
  });

  it("encodes the poem app's whole request within the 64-token context", () => {
    const prompt = encodeChat(
      poemRequest('the first snow over a quiet harbour').map((m) => ({ role: m.role as 'system' | 'user', content: String(m.content) })),
      tokenizer,
    );
    expect(prompt[0]).to.equal(SPECIAL_TOKENS.USER);
    expect(prompt.at(-1)).to.equal(SPECIAL_TOKENS.EOS);
    expect(prompt.length).to.be.at.most(64);
  });

  it('training a tokenizer is deterministic', () => {
    const corpus = 'the rose is red, the violet blue\nthe honey sweet, and so are you\n'.repeat(3);
    expect(trainBpe(corpus, 60)).to.deep.equal(trainBpe(corpus, 60));
  });

  it("the model card reports held-out loss and perplexity below the unigram baseline's", () => {
    const e = card.training.evaluation;
    expect(e.heldOutExamples).to.be.greaterThan(50);
    expect(e.heldOutPerplexity).to.be.closeTo(Math.exp(e.heldOutLoss), 0.01 * e.heldOutPerplexity);
    expect(e.heldOutLoss).to.be.lessThan(e.unigramBaselineLoss);
    expect(card.training.seed).to.be.a('number');
    expect(card.corpus.package).to.match(/fortunes/);
  });
});

describe('strata-verse served beside strata-tiny', () => {
  const ms = modelServerForSuite();

  it('lists both built-in models, the text model first (what clients not told a model take)', async () => {
    const res = await getJson(`${ms.base}/v1/models`);
    expect(res.body.data.map((m: { id: string }) => m.id)).to.deep.equal(['strata-verse', 'strata-tiny']);
  });

  it("strata-verse answers the poem app's request with text (letters and words, not ids), without prompt truncation", async () => {
    const res = await postJson(ms.url, { model: 'strata-verse', messages: poemRequest('the sea'), temperature: 0.8, seed: 3, max_tokens: 48 });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const content: string = res.body.choices[0].message.content;
    expect(content.trim()).to.not.equal('');
    expect(content).to.match(/\p{L}{2,}/u);
    expect(content).to.not.match(/^\d+( \d+)*$/);
    expect(res.body.model).to.equal('strata-verse');
    expect(res.body.usage.prompt_tokens).to.be.at.most(64);
    // The same seed gives the same verse.
    const again = await postJson(ms.url, { model: 'strata-verse', messages: poemRequest('the sea'), temperature: 0.8, seed: 3, max_tokens: 48 });
    expect(again.body.choices[0].message.content).to.equal(content);
  });

  it('strata-tiny on the same server still answers token ids', async () => {
    const res = await postJson(ms.url, { model: 'strata-tiny', messages: [{ role: 'user', content: '10 20 30' }], temperature: 0 });
    expect(res.body.choices[0].message.content).to.equal('10 20 30');
  });

  it('strata-verse logprobs tokens are its subword pieces and add up to the content', async () => {
    const res = await postJson(ms.url, {
      model: 'strata-verse',
      messages: poemRequest('night'),
      temperature: 0.7,
      seed: 9,
      max_tokens: 20,
      logprobs: true,
      top_logprobs: 2,
    });
    const choice = res.body.choices[0];
    const tokens = choice.logprobs.content.map((e: { token: string }) => e.token);
    expect(tokens).to.have.length(res.body.usage.completion_tokens);
    expect(tokens.join('')).to.equal(choice.message.content);
  });

  it("a request that leaves temperature and top_p out gets the model's own: strata-verse its generation_config.json, strata-tiny OpenAI's", async () => {
    const generation = JSON.parse(readFileSync(path.join(VERSE_DIR, GENERATION_CONFIG_FILE), 'utf8')) as { temperature: number; top_p: number };
    expect(generation.temperature).to.be.below(1);
    const verse = async (sampling: object) =>
      (await postJson(ms.url, { model: 'strata-verse', messages: poemRequest('rain'), seed: 5, max_tokens: 40, ...sampling })).body.choices[0].message
        .content as string;
    const defaulted = await verse({});
    expect(defaulted).to.equal(await verse({ temperature: generation.temperature, top_p: generation.top_p }));
    expect(defaulted).to.not.equal(await verse({ temperature: 1, top_p: 1 }));
    const tiny = async (sampling: object) =>
      (await postJson(ms.url, { model: 'strata-tiny', messages: [{ role: 'user', content: '10 20 30 40' }], seed: 5, ...sampling })).body.choices[0].message
        .content as string;
    expect(await tiny({})).to.equal(await tiny({ temperature: 1, top_p: 1 }));
  });

  describe("the poem a newcomer reads: the poem app's request as `npm start` configures it (strata-verse, its own sampling)", () => {
    const upstream = loadPoemAppConfig({ API_MODEL: 'strata-verse' }).upstream;
    const corpusWords = new Set(readFileSync(path.join(VERSE_DIR, 'corpus-words.txt'), 'utf8').split('\n').filter(Boolean));
    const themes = ['the sea', 'autumn rain', 'love', 'the night sky'];
    const poems: string[] = [];

    before(async () => {
      // Every form on two themes, each with its own seed, so the draw is fixed.
      for (const [i, type] of POEM_TYPES.entries()) {
        for (const theme of [themes[i % themes.length]!, themes[(i + 1) % themes.length]!]) {
          const body = { ...buildPoemRequest(upstream, type, theme, Math.min(upstream.maxTokens, MAX_OUTPUT_TOKENS)), seed: poems.length + 1 };
          const res = await postJson(ms.url, body);
          expect(res.status, JSON.stringify(res.body)).to.equal(200);
          poems.push(res.body.choices[0].message.content);
        }
      }
    });

    it("is written in the corpus's words: four in five words it writes are words of the songs and poems it learned from", () => {
      const words = poems.flatMap(verseWords);
      const unknown = words.filter((w) => !corpusWords.has(w));
      expect(words.length).to.be.at.least(poems.length * 6);
      expect(unknown.length / words.length, `words not in the corpus: ${unknown.join(', ')}`).to.be.at.most(0.2);
    });

    it('is verse: half the poems or more in lines, every line a few words, no stray characters', () => {
      const lines = poems.map((poem) => poem.split('\n').filter((l) => l.trim()));
      expect(lines.filter((l) => l.length >= 2).length, poems.join('\n---\n')).to.be.at.least(poems.length / 2);
      for (const [i, poem] of poems.entries()) {
        for (const line of lines[i]!) expect(verseWords(line).length, poem).to.be.within(1, 14);
        // No replacement characters; no control characters beside the line breaks in what the poem app
        // shows (the model can sample a backspace piece of its vocabulary; the app drops control characters).
        expect(poem, poem).to.not.match(/[\uFFFD]/u);
        expect(verseLines(poem).join('\n'), poem).to.not.match(/[^\P{Cc}\n]/u);
      }
    });
  });
});
