import path from 'node:path';
import { expect } from 'chai';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { POEM_TYPES } from '../../images/poem-app/src/poem-types.js';
import { MAX_CONTENT_LENGTH, MAX_THEME_LENGTH } from '../../images/poem-app/src/requests.js';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.js';
import { getJson, postJson, startTestPoemApp, tempDir } from './support/poem-app-harness.js';

describe('poem-app API (real SQLite file)', () => {
  let tmp: ReturnType<typeof tempDir>;
  let dbPath: string;
  let upstream: FakeOpenAI;
  let app: RunningService;

  before(async () => {
    tmp = tempDir('poem-api');
    // A nested folder that does not exist yet: the app must create it.
    dbPath = path.join(tmp.dir, 'nested', 'poems.db');
    upstream = await startFakeOpenAI();
    app = await startTestPoemApp(dbPath, upstream.baseUrl);
  });

  after(async () => {
    await app?.stop();
    await upstream?.close();
    tmp?.remove();
  });

  it('serves at least five poem types, each with a code and a label', async () => {
    const { status, body } = await getJson(`${app.url}/api/poem-types`);
    expect(status).to.equal(200);
    expect(body.types.length).to.be.at.least(5);
    for (const t of body.types) {
      expect(t.code).to.match(/^[a-z-]+$/);
      expect(t.label).to.be.a('string').and.not.equal('');
    }
    expect(body.types.map((t: { code: string }) => t.code)).to.include.members(['sonnet', 'haiku', 'limerick', 'free-verse', 'ode']);
  });

  it('stores a poem (201, type label, ISO createdAt) and lists newest first', async () => {
    const first = await postJson(`${app.url}/api/poems`, { type: 'Haiku', theme: 'morning tide', content: 'salt wind\nfirst light' });
    expect(first.status).to.equal(201);
    expect(first.body).to.include({ type: 'Haiku', theme: 'morning tide', content: 'salt wind\nfirst light' });
    expect(first.body.id).to.be.a('number');
    expect(new Date(first.body.createdAt).toISOString()).to.equal(first.body.createdAt);

    // A type code is accepted too, and stored as its label.
    const second = await postJson(`${app.url}/api/poems`, { type: 'free-verse', theme: 'city at night', content: 'neon hums' });
    expect(second.status).to.equal(201);
    expect(second.body.type).to.equal('Free verse');

    const list = await getJson(`${app.url}/api/poems`);
    expect(list.status).to.equal(200);
    expect(list.body.poems.map((p: { id: number }) => p.id).slice(0, 2)).to.deep.equal([second.body.id, first.body.id]);
    expect(list.body.poems[0]).to.deep.equal(second.body);

    const one = await getJson(`${app.url}/api/poems/${first.body.id}`);
    expect(one.body).to.deep.equal(first.body);
    expect((await getJson(`${app.url}/api/poems/999999`)).status).to.equal(404);
  });

  it('honours ?limit= and rejects a bad one', async () => {
    const limited = await getJson(`${app.url}/api/poems?limit=1`);
    expect(limited.body.poems).to.have.length(1);
    const bad = await getJson(`${app.url}/api/poems?limit=0`);
    expect(bad.status).to.equal(400);
    expect(bad.body.error.details[0].field).to.equal('limit');
  });

  describe('validation: each bad input gets 400 with a JSON error and stores nothing', () => {
    const longTheme = 'x'.repeat(MAX_THEME_LENGTH + 1);
    const cases: Array<{ name: string; url: string; body: unknown; raw?: string; contentType?: string; message: RegExp }> = [
      { name: 'generate: unknown type', url: '/api/generate-poem', body: { type: 'epic-saga', theme: 'sea' }, message: /unknown poem type "epic-saga"/ },
      { name: 'generate: missing type', url: '/api/generate-poem', body: { theme: 'sea' }, message: /type is required/ },
      { name: 'generate: type label instead of code', url: '/api/generate-poem', body: { type: 'Sonnet', theme: 'sea' }, message: /unknown poem type/ },
      { name: 'generate: empty theme', url: '/api/generate-poem', body: { type: 'sonnet', theme: '' }, message: /theme must not be empty/ },
      { name: 'generate: whitespace theme', url: '/api/generate-poem', body: { type: 'sonnet', theme: '  \n\t ' }, message: /theme must not be empty/ },
      { name: 'generate: over-long theme', url: '/api/generate-poem', body: { type: 'sonnet', theme: longTheme }, message: /at most 200 characters/ },
      {
        name: 'generate: theme not a string',
        url: '/api/generate-poem',
        body: { type: 'sonnet', theme: 42 },
        message: /theme is required and must be a string/,
      },
      { name: 'generate: body is an array', url: '/api/generate-poem', body: ['sonnet'], message: /must be a JSON object/ },
      { name: 'generate: malformed JSON', url: '/api/generate-poem', body: null, raw: '{"type": "sonnet",', message: /not valid JSON/ },
      {
        name: 'generate: not JSON at all',
        url: '/api/generate-poem',
        body: null,
        raw: 'type=sonnet&theme=sea',
        contentType: 'application/x-www-form-urlencoded',
        message: /must be JSON/,
      },
      { name: 'save: unknown type', url: '/api/poems', body: { type: 'Epic', theme: 'sea', content: 'waves' }, message: /unknown poem type "Epic"/ },
      { name: 'save: empty theme', url: '/api/poems', body: { type: 'Ode', theme: '', content: 'waves' }, message: /theme must not be empty/ },
      { name: 'save: over-long theme', url: '/api/poems', body: { type: 'Ode', theme: longTheme, content: 'waves' }, message: /at most 200 characters/ },
      { name: 'save: empty content', url: '/api/poems', body: { type: 'Ode', theme: 'sea', content: '   ' }, message: /content must not be empty/ },
      { name: 'save: missing content', url: '/api/poems', body: { type: 'Ode', theme: 'sea' }, message: /content is required/ },
      {
        name: 'save: over-long content',
        url: '/api/poems',
        body: { type: 'Ode', theme: 'sea', content: 'y'.repeat(MAX_CONTENT_LENGTH + 1) },
        message: /content must be at most/,
      },
      { name: 'save: text/plain body', url: '/api/poems', body: null, raw: 'an ode', contentType: 'text/plain', message: /must be JSON/ },
      { name: 'save: bare JSON null (only objects are accepted)', url: '/api/poems', body: null, raw: 'null', message: /not valid JSON/ },
    ];

    for (const c of cases) {
      it(c.name, async () => {
        const before = (await getJson(`${app.url}/api/poems`)).body.poems.length;
        const calls = upstream.received.length;
        const { status, body } = await postJson(`${app.url}${c.url}`, c.body, { raw: c.raw, contentType: c.contentType });
        expect(status).to.equal(400);
        expect(body.error.message).to.match(c.message);
        expect((await getJson(`${app.url}/api/poems`)).body.poems.length).to.equal(before);
        expect(upstream.received.length, 'no upstream call for bad input').to.equal(calls);
      });
    }

    it('lists every problem of one request in details, by field', async () => {
      const { status, body } = await postJson(`${app.url}/api/poems`, { type: 'nope', theme: '', content: '' });
      expect(status).to.equal(400);
      expect(body.error.details.map((d: { field: string }) => d.field)).to.have.members(['type', 'theme', 'content']);
    });
  });

  it('refuses a body over the size limit with 413 and a JSON error', async () => {
    const { status, body } = await postJson(`${app.url}/api/poems`, { type: 'Ode', theme: 'sea', content: 'z'.repeat(200_000) });
    expect(status).to.equal(413);
    expect(body.error.code).to.equal('payload_too_large');
  });

  it('answers unknown API paths with a JSON 404', async () => {
    const { status, body } = await getJson(`${app.url}/api/nothing-here`);
    expect(status).to.equal(404);
    expect(body.error.message).to.match(/no such endpoint/);
  });

  it('serves the page and the ops endpoints', async () => {
    const page = await fetch(`${app.url}/`);
    expect(page.status).to.equal(200);
    expect(await page.text()).to.include('<title>Strata Poet</title>');
    expect(page.headers.get('content-security-policy')).to.include("default-src 'self'");
    expect((await getJson(`${app.url}/healthz`)).status).to.equal(200);
    const ready = await getJson(`${app.url}/readyz`);
    expect(ready.status).to.equal(200);
    expect(ready.body.checks.database).to.equal('ok');
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).to.include('poems_saved_total');
    expect(metrics).to.include('poem_generation_duration_seconds');
  });

  it('keeps saved poems across a restart on the same file', async () => {
    const saved = await postJson(`${app.url}/api/poems`, { type: 'Sonnet', theme: 'persistence', content: 'what was written stays' });
    expect(saved.status).to.equal(201);
    const before = (await getJson(`${app.url}/api/poems`)).body.poems;
    await app.stop();
    app = await startTestPoemApp(dbPath, upstream.baseUrl);
    const after = (await getJson(`${app.url}/api/poems`)).body.poems;
    expect(after).to.deep.equal(before);
    expect(after[0]).to.deep.equal(saved.body);
    // New poems continue after the old ones rather than reusing ids.
    const next = await postJson(`${app.url}/api/poems`, { type: 'Ode', theme: 'afterwards', content: 'again' });
    expect(next.body.id).to.be.greaterThan(saved.body.id);
  });

  it('has a label and a code for every type, both unique', () => {
    expect(new Set(POEM_TYPES.map((t) => t.code)).size).to.equal(POEM_TYPES.length);
    expect(new Set(POEM_TYPES.map((t) => t.label.toLowerCase())).size).to.equal(POEM_TYPES.length);
  });
});
