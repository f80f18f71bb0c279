import path from 'node:path';
import { expect } from 'chai';
import { startModelServer } from '../../images/model-server/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { startPoemApp } from '../../images/poem-app/src/app.js';
import { linesAsked, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.js';
import { TEST_API_KEY, TEST_MODEL, getJson, postJson, poemAppOnFakeUpstream, startTestPoemApp, tempDir } from './support/poem-app-harness.js';

const WRITE_KEY = 'poem-history-key-0123456789';
const poem = { type: 'Haiku', theme: 'tide', content: 'salt wind\nfirst light' };

function del(url: string, authorization?: string): Promise<Response> {
  return fetch(url, { method: 'DELETE', headers: authorization ? { authorization } : {} });
}

function postWith(url: string, body: unknown, authorization?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
    body: JSON.stringify(body),
  });
}

describe('poem-app: history delete, write access, upstream limits and refusals', () => {
  const env = poemAppOnFakeUpstream('poem-history', { maxTokens: 256 });

  it('DELETE /api/poems/:id removes a poem (204), then answers 404 for it', async () => {
    const saved = await postJson(`${env.app.url}/api/poems`, poem);
    const keep = await postJson(`${env.app.url}/api/poems`, { ...poem, theme: 'kept' });
    const res = await del(`${env.app.url}/api/poems/${saved.body.id}`);
    expect(res.status).to.equal(204);
    expect((await getJson(`${env.app.url}/api/poems/${saved.body.id}`)).status).to.equal(404);
    const ids = (await getJson(`${env.app.url}/api/poems`)).body.poems.map((p: { id: number }) => p.id);
    expect(ids).to.include(keep.body.id).and.not.include(saved.body.id);
    for (const id of [saved.body.id, 999999, 'abc', '1e3']) {
      const again = await del(`${env.app.url}/api/poems/${id}`);
      expect(again.status, String(id)).to.equal(404);
      expect((await again.json()).error.code).to.equal('not_found');
    }
  });

  it('serves /favicon.ico (the page icon) instead of 404', async () => {
    const res = await fetch(`${env.app.url}/favicon.ico`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^image\/svg\+xml/);
    expect(await res.text()).to.include('<svg');
  });

  it('GET /api/info says which model writes and where, never the key', async () => {
    const res = await getJson(`${env.app.url}/api/info`);
    expect(res.body).to.deep.equal({ model: TEST_MODEL, origin: new URL(env.upstream.baseUrl).origin, historyWrites: 'open' });
    expect(JSON.stringify(res.body)).to.not.include(TEST_API_KEY);
  });

  it('asks for no more tokens than the upstream model allows (its /v1/models entry), else API_MAX_TOKENS', async () => {
    env.upstream.received.length = 0;
    expect((await postJson(`${env.app.url}/api/generate-poem`, { type: 'haiku', theme: 'snow' })).status).to.equal(200);
    // The fake lists no model route: the configured value goes out as it is.
    expect(env.upstream.received[0]!.body.max_tokens).to.equal(256);

    const limited = await startFakeOpenAI();
    limited.modelInfo = { max_model_len: 128, maxOutputTokens: 64 };
    const clamped = await startTestPoemApp(path.join(env.dir, 'clamped.db'), limited.baseUrl, { maxTokens: 256 });
    try {
      for (let i = 0; i < 2; i++) expect((await postJson(`${clamped.url}/api/generate-poem`, { type: 'haiku', theme: 'snow' })).status).to.equal(200);
      expect(limited.received.map((r) => r.body.max_tokens)).to.deep.equal([64, 64]);
      expect(limited.modelLookups, 'the limit is read once').to.equal(1);
    } finally {
      await clamped.stop();
      await limited.close();
    }
  });

  const refusals: Array<[number, RegExp, string[], string?]> = [
    // What helps against an over-long prompt is the model server's truncation, not the poem app's settings.
    [
      400,
      /refused the poem app's prompt as longer than the context of model 'strata-test-model' \(HTTP 400\): nope/,
      ['MODEL_SERVER_TRUNCATE_PROMPT', 'truncatePrompt'],
      'context_length_exceeded',
    ],
    [401, /refused the poem app's API key \(HTTP 401\): nope/, ['API_KEY']],
    [404, /does not serve the model 'strata-test-model' \(HTTP 404\): nope/, ['API_MODEL', 'API_BASE_URL']],
    [400, /rejected the request for model 'strata-test-model' \(HTTP 400\): nope/, ['API_MODEL', 'API_MAX_TOKENS', 'API_BASE_URL', 'API_KEY']],
  ];
  for (const [status, message, settings, code] of refusals) {
    it(`explains an upstream ${status}${code ? ` ${code}` : ''}: 502 with what went wrong and which setting to change`, async () => {
      env.upstream.behave({ kind: 'error', status, message: 'nope', ...(code ? { code } : {}) });
      try {
        const res = await postJson(`${env.app.url}/api/generate-poem`, { type: 'haiku', theme: 'snow' });
        expect(res.status).to.equal(502);
        expect(res.body.error.code).to.equal('upstream_error');
        expect(res.body.error.message).to.match(message).and.include(new URL(env.upstream.baseUrl).origin);
        for (const setting of settings) expect(res.body.error.hint).to.include(setting);
        if (code) expect(res.body.error.hint).to.not.match(/API_MODEL|API_MAX_TOKENS/);
      } finally {
        env.upstream.behave({ kind: 'poem', content: linesAsked() });
      }
    });
  }
});

describe('poem-app: history writes when exposed (POEM_APP_API_KEY)', () => {
  let tmp: ReturnType<typeof tempDir>;
  let upstream: FakeOpenAI;
  const apps: RunningService[] = [];
  const start = async (host: string, apiKey?: string) => {
    const app = await startPoemApp({
      port: 0,
      host,
      databasePath: path.join(tmp.dir, `${apps.length}.db`),
      logger: createLogger('poem-app-test', 'silent'),
      ...(apiKey ? { apiKey } : {}),
      upstream: { baseUrl: upstream.baseUrl, apiKey: TEST_API_KEY, model: TEST_MODEL, timeoutMs: 5_000, maxRetries: 0, maxTokens: 64, temperature: 0.9 },
    });
    apps.push(app);
    return `http://127.0.0.1:${new URL(app.url).port}`;
  };

  before(async () => {
    tmp = tempDir('poem-writes');
    upstream = await startFakeOpenAI();
  });
  after(async () => {
    for (const app of apps) await app.stop();
    await upstream?.close();
    tmp?.remove();
  });

  it('with a key: saving and deleting need it (401 otherwise); reading and generating do not', async () => {
    const url = await start('127.0.0.1', WRITE_KEY);
    for (const auth of [undefined, 'Bearer wrong', `Basic ${WRITE_KEY}`]) {
      const res = await postWith(`${url}/api/poems`, poem, auth);
      expect(res.status).to.equal(401);
      expect(res.headers.get('www-authenticate')).to.equal('Bearer');
      expect((await res.json()).error.code).to.equal('unauthorized');
    }
    expect((await getJson(`${url}/api/poems`)).body.poems).to.deep.equal([]);
    const saved = await postWith(`${url}/api/poems`, poem, `Bearer ${WRITE_KEY}`);
    expect(saved.status).to.equal(201);
    const { id } = await saved.json();
    expect((await del(`${url}/api/poems/${id}`)).status).to.equal(401);
    expect((await del(`${url}/api/poems/${id}`, `Bearer ${WRITE_KEY}`)).status).to.equal(204);
    expect((await postJson(`${url}/api/generate-poem`, { type: 'haiku', theme: 'snow' })).status).to.equal(200);
    expect((await getJson(`${url}/api/info`)).body.historyWrites).to.equal('key');
  });

  it('bound beyond loopback without a key: writes are refused (403), the rest works', async () => {
    const url = await start('0.0.0.0');
    const res = await postWith(`${url}/api/poems`, poem);
    expect(res.status).to.equal(403);
    expect((await res.json()).error.code).to.equal('writes_disabled');
    expect((await del(`${url}/api/poems/1`)).status).to.equal(403);
    expect((await getJson(`${url}/api/poems`)).status).to.equal(200);
    expect((await postJson(`${url}/api/generate-poem`, { type: 'haiku', theme: 'snow' })).status).to.equal(200);
    expect((await getJson(`${url}/api/info`)).body.historyWrites).to.equal('disabled');
  });
});

describe('poem-app against the real model server', () => {
  let tmp: ReturnType<typeof tempDir>;
  let model: RunningService;
  let app: RunningService;

  before(async () => {
    tmp = tempDir('poem-real-upstream');
    model = await startModelServer({
      port: 0,
      host: '127.0.0.1',
      modelNames: ['strata-tiny'],
      truncatePrompt: true,
      logger: createLogger('model-server-test', 'silent'),
    });
    app = await startTestPoemApp(path.join(tmp.dir, 'poems.db'), `${model.url}/v1`, { model: 'strata-tiny', maxTokens: 256 });
  });
  after(async () => {
    await app?.stop();
    await model?.stop();
    tmp?.remove();
  });

  it("writes with API_MAX_TOKENS above the model's limit (256 > 64): the request is clamped, not refused", async () => {
    const res = await postJson(`${app.url}/api/generate-poem`, { type: 'haiku', theme: 'snow' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.model).to.equal('strata-tiny');
    // strata-tiny answers token ids by design: three lines of them, the theme opening the first.
    const lines = res.body.poem.split('\n');
    expect(lines, res.body.poem).to.have.length(3);
    expect(lines[0]).to.match(/^Snow — \d+( \d+)*$/);
    for (const line of lines.slice(1)) expect(line).to.match(/^\d+( \d+)*$/);
  });
});
