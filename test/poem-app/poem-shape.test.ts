import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/served-models.js';
import { startModelServer } from '../../images/model-server/src/app.js';
import { loadPoemAppConfig } from '../../images/poem-app/src/config.js';
import { acrosticLetters, containsTheme, lineCountOf, shapePoem, verseLines } from '../../images/poem-app/src/poem-shape.js';
import { POEM_TYPES, poemTypeByCode } from '../../images/poem-app/src/poem-types.js';
import { maxRequestsFor, Poet } from '../../images/poem-app/src/poet.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { MEASURED_THEMES, summarize, verseCorpusWords, writeMeasuredPoems, type MeasuredPoem } from '../../hack/bench/poem-shape.js';
import { linesAsked } from './support/fake-openai.js';
import { postJson, poemAppOnFakeUpstream } from './support/poem-app-harness.js';

const form = (code: string) => poemTypeByCode(code)!;

describe('poem shape: every form has its line count and its theme', () => {
  it('knows each form’s line count (an acrostic: one line per letter of its theme)', () => {
    const counts = Object.fromEntries(POEM_TYPES.filter((t) => t.code !== 'acrostic').map((t) => [t.code, lineCountOf(t, 'x')]));
    expect(counts).to.deep.equal({ sonnet: 14, haiku: 3, limerick: 5, 'free-verse': 8, ode: 10, villanelle: 19, ballad: 12 });
    expect(lineCountOf(form('acrostic'), 'the sea')).to.equal(6);
    expect(lineCountOf(form('acrostic'), 'a')).to.equal(3);
    expect(lineCountOf(form('acrostic'), 'x'.repeat(200))).to.equal(20);
  });

  it('reads lines of verse: trimmed, no blank, symbol-only or Markdown marks, no control characters', () => {
    expect(verseLines('## Title\r\n\r\n **bold** line \n---\n\u0007bell\n  ')).to.deep.equal(['Title', 'bold line', 'bell']);
  });

  it('finds the theme as whole words, any case, any spacing', () => {
    expect(containsTheme('All my Love', 'love')).to.equal(true);
    expect(containsTheme('a glove', 'love')).to.equal(false);
    expect(containsTheme('The\nnight   sky', 'the night sky')).to.equal(true);
    expect(containsTheme('c++ rules (a+b)', 'c++')).to.equal(true);
  });

  it('trims to the count, sets the stanzas apart, and opens the first line with a missing theme', () => {
    const lines = Array.from({ length: 16 }, (_, i) => `line ${i + 1}`);
    const sonnet = shapePoem(lines, form('sonnet'), 'autumn rain');
    expect(sonnet.split('\n\n').map((s) => s.split('\n').length)).to.deep.equal([4, 4, 4, 2]);
    expect(sonnet.split('\n')[0]).to.equal('Autumn rain — line 1');
    expect(verseLines(sonnet)).to.have.length(14);
    expect(shapePoem(['rain on the roof', 'b', 'c'], form('haiku'), 'rain')).to.equal('rain on the roof\nb\nc');
  });

  it('spells an acrostic’s theme down its first letters: fitting lines in their places, others opened with a word of their letter', () => {
    const firstLetters = (poem: string) =>
      verseLines(poem)
        .map((l) => /\p{L}/u.exec(l)![0].toLowerCase())
        .join('');
    expect(acrosticLetters(form('acrostic'), 'the sea')).to.deep.equal(['t', 'h', 'e', 's', 'e', 'a']);
    expect(acrosticLetters(form('haiku'), 'the sea')).to.deep.equal([]);
    // The upstream's lines in another order: each goes to its letter's place, the extra one is left out.
    const reordered = shapePoem(['a gull cries', 'every wave', 'silent sea', 'one more'], form('acrostic'), 'sea');
    expect(reordered).to.equal('silent sea\nevery wave\na gull cries');
    // None begins with its letter: opened with a word of it; the theme, missing, then opens the first line.
    const opened = shapePoem(['the tide', 'waves', 'gulls'], form('acrostic'), 'sea');
    expect(opened).to.equal('Sea — Still the tide\nEven waves\nAnd gulls');
    expect(firstLetters(opened)).to.equal('sea');
    // Quotes and other scripts: the first letter counts; a letter beyond a–z opens its line itself.
    expect(firstLetters(shapePoem(['“Öl” on water', 'lamps', 'x'], form('acrostic'), 'öl'))).to.equal('ölx');
    expect(shapePoem(['lamps', 'water', 'x'], form('acrostic'), 'öl')).to.equal('Öl — Ö water\nlamps\nx');
  });

  describe('against any upstream (a fake OpenAI-compatible one)', () => {
    const env = poemAppOnFakeUpstream('poem-shape');
    beforeEach(() => {
      env.upstream.received.length = 0;
    });
    const generate = (type: string, theme: string) => postJson(`${env.app.url}/api/generate-poem`, { type, theme });

    it('asks again for the missing lines when an answer is short, with the poem so far', async () => {
      env.upstream.behave({ kind: 'poem', content: (req) => linesAsked()(req).split('\n').slice(0, 2).join('\n') });
      const res = await generate('limerick', 'a cat');
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(verseLines(res.body.poem)).to.have.length(5);
      expect(env.upstream.received).to.have.length(3);
      const followUp = env.upstream.received[1]!.body.messages!;
      expect(followUp.map((m) => m.role)).to.deep.equal(['system', 'user', 'assistant', 'user']);
      expect(followUp[2]!.content).to.equal('line 1 of a poem on a cat\nline 2 of a poem on a cat');
      expect(followUp[3]!.content).to.include('next 3 lines').and.include('"a cat"');
      expect(env.upstream.received[2]!.body.messages![3]!.content).to.include('next 1 lines');
    });

    it('answers an acrostic whose first letters spell the theme', async () => {
      const res = await generate('acrostic', 'the sea');
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const first = verseLines(res.body.poem).map((l) => /\p{L}/u.exec(l)![0].toLowerCase());
      expect(first.join('')).to.equal('thesea');
      // The request says what an acrostic is (its form's description) and stays short enough for strata-verse's 64-token context.
      expect(env.upstream.received[0]!.body.messages!.at(-1)!.content).to.include('The first letters of the lines spell out the theme.');
    });

    it('trims a long answer and drops repeated lines', async () => {
      env.upstream.behave({ kind: 'poem', content: 'a cat\nA  CAT\nsits\nsits\non\nthe\nmat\nand\nmore' });
      const res = await generate('haiku', 'a cat');
      expect(res.body.poem).to.equal('a cat\nsits\non');
      expect(env.upstream.received).to.have.length(1);
    });

    it('answers 502 with how many lines it got when the upstream keeps repeating itself (bounded follow-ups)', async () => {
      env.upstream.behave({ kind: 'poem', content: 'the same line' });
      const res = await generate('sonnet', 'echo');
      expect(res.status).to.equal(502);
      expect(res.body.error.code).to.equal('upstream_empty');
      expect(res.body.error.message).to.include('1 of the 14 lines of a sonnet');
      expect(env.upstream.received).to.have.length(maxRequestsFor(14));
    });

    it('answers 502 when the upstream writes nothing at all', async () => {
      env.upstream.behave({ kind: 'poem', content: ' \n --- \n' });
      const res = await generate('haiku', 'silence');
      expect(res.status).to.equal(502);
      expect(res.body.error.code).to.equal('upstream_empty');
      env.upstream.behave({ kind: 'poem', content: linesAsked() });
    });
  });

  describe('against a slow upstream that writes one line a request', () => {
    // Each request well within the client timeout (1.5 s), so only the poem's deadline (3 s) can stop them.
    const env = poemAppOnFakeUpstream('poem-slow', { timeoutMs: 1500 });

    it('bounds a poem by twice the client timeout, follow-ups included', async () => {
      env.upstream.behave({ kind: 'poem', content: (req) => linesAsked()(req).split('\n')[0]!, delayMs: 250 });
      const res = await postJson(`${env.app.url}/api/generate-poem`, { type: 'villanelle', theme: 'slow tide' });
      expect(res.status, JSON.stringify(res.body)).to.equal(502);
      expect(res.body.error.code).to.equal('upstream_timeout');
      // (On a machine too loaded to answer one request within 1.5 s, the client timeout ends it instead.)
      expect(res.body.error.message).to.match(/of the 19 lines of a villanelle in 3 s \(twice API_TIMEOUT_MS|did not answer within/);
      // 21 requests of 250 ms would take over 5 s: the deadline stopped the follow-ups before.
      expect(env.upstream.received.length).to.be.below(maxRequestsFor(19));
    });
  });

  describe("with the platform's model server and strata-verse: 8 forms × 5 themes", function () {
    this.timeout(120_000);
    let server: RunningService;
    let poems: MeasuredPoem[];

    before(async () => {
      server = await startModelServer({ port: 0, host: '127.0.0.1', truncatePrompt: true, logger: createLogger('model-server-test', 'silent') });
      poems = await writeMeasuredPoems(new Poet(loadPoemAppConfig({ API_BASE_URL: `${server.url}/v1`, API_MODEL: 'strata-verse' }).upstream));
    });
    after(async () => {
      await server?.stop();
    });

    it('all 40 poems have their form’s line count and their theme', () => {
      expect(poems).to.have.length(POEM_TYPES.length * MEASURED_THEMES.length);
      for (const p of poems) {
        expect(p.lineCount, `${p.form} on ${p.theme}:\n${p.poem}`).to.equal(p.expectedLines);
        expect(p.themePresent, `${p.form} on ${p.theme}:\n${p.poem}`).to.equal(true);
        if (p.form === 'acrostic') {
          const first = verseLines(p.poem).map((l) => /\p{L}/u.exec(l)![0].toLowerCase());
          expect(first.join(''), p.poem).to.equal(acrosticLetters(form('acrostic'), p.theme).join(''));
        }
      }
    });

    it('is still written in its corpus’s words (the share the model card reports)', () => {
      expect(summarize(poems, verseCorpusWords()).corpusWordShare).to.be.at.least(0.75);
    });

    it('the model card reports the measured runs: every poem with its lines and theme', () => {
      const card = JSON.parse(readFileSync(path.join(DEFAULT_MODEL_DIR, 'strata-verse', 'model-card.json'), 'utf8'));
      expect(card.poemApp.runs).to.have.length.at.least(1);
      for (const run of card.poemApp.runs) {
        expect(run.poems).to.equal(POEM_TYPES.length * MEASURED_THEMES.length);
        expect(run).to.include({ linesRight: run.poems, themePresent: run.poems });
        expect(run.corpusWordShare).to.be.within(0, 1);
      }
    });
  });
});
