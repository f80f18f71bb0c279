import path from 'node:path';
import { expect } from 'chai';
import { eventually } from '../support/eventually.js';
import { linesAsked, unusedPort } from './support/fake-openai.js';
import { TEST_API_KEY, TEST_MODEL, getJson, postJson, poemAppOnFakeUpstream, startTestPoemApp, tempDir } from './support/poem-app-harness.js';

describe('poem-app upstream (OpenAI chat-completions wire format)', () => {
  // A short client timeout keeps the "upstream hangs" case quick; the default is 30 s.
  const env = poemAppOnFakeUpstream('poem-upstream', { timeoutMs: 400 });

  beforeEach(() => {
    env.upstream.received.length = 0;
  });

  it('sends the configured model, a system and a user message naming type, line count and theme, and the API key', async () => {
    const sonnet = ['  Shall I compare thee to lighthouse keepers\r', ...Array.from({ length: 13 }, (_, i) => `to a summer server, line ${i + 2}?  `)];
    env.upstream.behave({ kind: 'poem', content: sonnet.join('\n') + '\n' });
    const { status, body } = await postJson(`${env.app.url}/api/generate-poem`, { type: 'sonnet', theme: 'lighthouse   keepers' });
    expect(status).to.equal(200);
    // Trimmed lines in the sonnet's stanzas (4, 4, 4, 2).
    const lines = sonnet.map((l) => l.trim());
    expect(body.poem).to.equal([lines.slice(0, 4), lines.slice(4, 8), lines.slice(8, 12), lines.slice(12)].map((s) => s.join('\n')).join('\n\n'));

    expect(env.upstream.received).to.have.length(1);
    const sent = env.upstream.received[0]!;
    expect(sent.method).to.equal('POST');
    expect(sent.path).to.equal('/v1/chat/completions');
    expect(sent.authorization).to.equal(`Bearer ${TEST_API_KEY}`);
    expect(sent.body.model).to.equal(TEST_MODEL);
    expect(sent.body.max_tokens).to.equal(128);
    const messages = sent.body.messages!;
    expect(messages.map((m) => m.role)).to.deep.equal(['system', 'user']);
    expect(messages[1]!.content)
      .to.match(/sonnet/i)
      .and.include('of 14 lines')
      .and.include('"lighthouse keepers"');
  });

  it('copes with any text the model returns (e.g. token ids from the local model server)', async () => {
    env.upstream.behave({ kind: 'poem', content: linesAsked((n) => `17 942 ${n} 3 581 <unk> </s> \u0000 😀`) });
    const { status, body } = await postJson(`${env.app.url}/api/generate-poem`, { type: 'haiku', theme: 'numbers' });
    expect(status).to.equal(200);
    // Control characters are dropped; the rest is kept as written.
    expect(body.poem).to.equal(['Numbers — 17 942 1 3 581 <unk> </s>  😀', '17 942 2 3 581 <unk> </s>  😀', '17 942 3 3 581 <unk> </s>  😀'].join('\n'));
  });

  it('answers 502 when the upstream returns an empty poem', async () => {
    env.upstream.behave({ kind: 'poem', content: '   ' });
    const { status, body } = await postJson(`${env.app.url}/api/generate-poem`, { type: 'ode', theme: 'silence' });
    expect(status).to.equal(502);
    expect(body.error.code).to.equal('upstream_empty');
  });

  it('answers 502 with the reason when the upstream fails with HTTP 500, without retrying', async () => {
    env.upstream.behave({ kind: 'error', status: 500, message: 'model crashed' });
    const { status, body } = await postJson(`${env.app.url}/api/generate-poem`, { type: 'limerick', theme: 'a cat' });
    expect(status).to.equal(502);
    expect(body.error.code).to.equal('upstream_error');
    expect(body.error.message).to.include('HTTP 500').and.include('model crashed');
    expect(env.upstream.received).to.have.length(1);
  });

  it('answers 502 (not a hang) when the upstream never answers', async () => {
    env.upstream.behave({ kind: 'hang' });
    const { status, body } = await postJson(`${env.app.url}/api/generate-poem`, { type: 'ode', theme: 'waiting' });
    expect(status).to.equal(502);
    expect(body.error.code).to.equal('upstream_timeout');
    expect(body.error.message).to.match(/did not answer within 0.4 s/);
    expect(env.upstream.received).to.have.length(1);
  });

  it('answers 502 when nothing listens at the upstream address (connection refused)', async () => {
    const port = await unusedPort();
    const other = tempDir('poem-down');
    const down = await startTestPoemApp(path.join(other.dir, 'poems.db'), `http://127.0.0.1:${port}/v1`);
    try {
      const { status, body } = await postJson(`${down.url}/api/generate-poem`, { type: 'haiku', theme: 'absence' });
      expect(status).to.equal(502);
      expect(body.error.code).to.equal('upstream_unavailable');
      // The model service is what cannot be reached: said so, with the URL the app is configured with.
      expect(body.error.message).to.equal(`the model service at http://127.0.0.1:${port}/v1 (API_BASE_URL) is unreachable; please try again later`);
      expect(body.error.hint).to.include('API_BASE_URL');
      // Saving and listing do not depend on the upstream.
      expect((await postJson(`${down.url}/api/poems`, { type: 'Haiku', theme: 'absence', content: 'still here' })).status).to.equal(201);
    } finally {
      await down.stop();
      other.remove();
    }
  });

  it('cancels the upstream call when the visitor goes away', async () => {
    const other = tempDir('poem-cancel');
    const patient = await startTestPoemApp(path.join(other.dir, 'poems.db'), env.upstream.baseUrl, { timeoutMs: 20_000 });
    try {
      env.upstream.behave({ kind: 'hang' });
      const abandonedBefore = env.upstream.abandoned;
      const visitor = new AbortController();
      const request = postJson(`${patient.url}/api/generate-poem`, { type: 'ballad', theme: 'leaving' }, { signal: visitor.signal });
      await eventually(() => env.upstream.received.length === 1);
      visitor.abort();
      await request.catch(() => undefined);
      await eventually(() => env.upstream.abandoned === abandonedBefore + 1);
    } finally {
      // After an abort, fetch's pool may leave a fresh connection that never sends a request; Node does not
      // count it as idle, so a short grace ends it instead of waiting for the pool's 4 s keep-alive.
      await patient.stop(250);
      other.remove();
    }
  });

  it('counts generations by type and outcome in /metrics', async () => {
    env.upstream.behave({ kind: 'poem', content: linesAsked() });
    await postJson(`${env.app.url}/api/generate-poem`, { type: 'acrostic', theme: 'METRICS' });
    env.upstream.behave({ kind: 'error', status: 503, message: 'busy' });
    await postJson(`${env.app.url}/api/generate-poem`, { type: 'villanelle', theme: 'METRICS' });
    const metrics = await (await fetch(`${env.app.url}/metrics`)).text();
    expect(metrics).to.match(/poem_generations_total\{[^}]*type="acrostic"[^}]*outcome="ok"[^}]*\} 1/);
    expect(metrics).to.match(/poem_generations_total\{[^}]*type="villanelle"[^}]*outcome="upstream_error"[^}]*\} 1/);
    expect(metrics).to.match(/poem_generation_duration_seconds_count\{[^}]*outcome="ok"[^}]*\} \d+/);
    expect((await getJson(`${env.app.url}/readyz`)).status).to.equal(200);
  });
});
