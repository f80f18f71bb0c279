import path from 'node:path';
import { expect } from 'chai';
import { eventually } from '../support/eventually.js';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { startFakeOpenAI } from './support/fake-openai.js';
import { startTestPoemApp, tempDir, type Json } from './support/poem-app-harness.js';

/** Poems being written are shared between visitors: one visitor's flood is refused past its share, another visitor is served. */
describe('poem-app: one visitor cannot take every generation', () => {
  const env = fixtureHooks(
    'suite',
    async () => {
      const tmp = tempDir('poem-shares');
      const upstream = await startFakeOpenAI();
      // Behind a trusted proxy on loopback, each X-Forwarded-For address is a visitor.
      const app = await startTestPoemApp(
        path.join(tmp.dir, 'poems.db'),
        upstream.baseUrl,
        { timeoutMs: 1_000 },
        { generations: { slots: 4, perVisitor: 2 }, trustProxy: 'loopback' },
      );
      return { app, upstream, remove: tmp.remove };
    },
    async (f) => {
      await f.app.stop();
      await f.upstream.close();
      f.remove();
    },
  );

  const generate = async (visitor: string): Promise<{ status: number; retryAfter: string | null; body: Json }> => {
    const res = await fetch(`${env.app.url}/api/generate-poem`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': visitor },
      body: JSON.stringify({ type: 'haiku', theme: 'waiting' }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
  };

  it("a visitor's third poem at once is refused 429 busy; another visitor's poem is still written (here: the upstream's timeout)", async () => {
    // The upstream hangs: every poem holds its generation until the upstream timeout (1 s) ends it.
    env.upstream.behave({ kind: 'hang' });
    const first = [generate('10.0.0.1'), generate('10.0.0.1')];
    await eventually(() => expect(env.upstream.received).to.have.length(2));
    const third = await generate('10.0.0.1');
    expect(third.status).to.equal(429);
    expect(third.body.error.code).to.equal('busy');
    expect(third.retryAfter).to.equal('1');
    const other = await generate('10.0.0.2');
    expect(other.status).to.equal(502);
    expect(other.body.error.code).to.equal('upstream_timeout');
    expect((await Promise.all(first)).map((a) => a.body.error.code)).to.deep.equal(['upstream_timeout', 'upstream_timeout']);
    // Their generations are over: the first visitor is served again.
    expect((await generate('10.0.0.1')).body.error.code).to.equal('upstream_timeout');
  });
});
