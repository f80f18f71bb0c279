import path from 'node:path';
import { expect } from 'chai';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { sendAllThenRead, trickleThenRead } from '../support/http.js';
import { unusedPort } from './support/fake-openai.js';
import { getJson, startTestPoemApp, tempDir } from './support/poem-app-harness.js';

/** Bodies that stop arriving: each request is refused once its body has been silent for the idle limit; the app goes on. */
describe('poem-app: bodies that stall', () => {
  const IDLE_MS = 300;
  const env = fixtureHooks(
    'suite',
    async () => {
      const tmp = tempDir('poem-slow');
      // No upstream is needed: only history writes are sent.
      const app = await startTestPoemApp(path.join(tmp.dir, 'poems.db'), `http://127.0.0.1:${await unusedPort()}/v1`, {}, { bodyIdleTimeoutMs: IDLE_MS });
      return { app, remove: tmp.remove };
    },
    async (f) => {
      await f.app.stop();
      f.remove();
    },
  );

  const save = JSON.stringify({ type: 'haiku', theme: 'patience', content: 'one\ntwo\nthree' });
  const head = (length: number) =>
    `POST /api/poems HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`;

  it('headers and never a body: 408 request_timeout, the connection closed, and nothing saved', async () => {
    const answer = await sendAllThenRead(env.app.port, head(save.length), 0, '', 10_000);
    expect(answer.error).to.not.equal('hang');
    expect(answer.statuses).to.deep.equal([408]);
    expect(answer.text).to.include('"request_timeout"');
    expect((await getJson(`${env.app.url}/api/poems`)).body.poems).to.deep.equal([]);
  });

  it('a body that stops half-way: 408, nothing saved; the app keeps answering', async () => {
    const answer = await sendAllThenRead(env.app.port, head(save.length) + save.slice(0, 20), 0, '', 10_000);
    expect(answer.error).to.not.equal('hang');
    expect(answer.statuses).to.deep.equal([408]);
    const list = await getJson(`${env.app.url}/api/poems`);
    expect(list.status).to.equal(200);
    expect(list.body.poems).to.deep.equal([]);
  });

  it('a body trickled a byte at a time, each within the limit, is read whole and saved', async () => {
    const answer = await trickleThenRead(env.app.port, head(save.length), save, IDLE_MS / 10, 30_000);
    expect(answer.statuses).to.deep.equal([201]);
    expect((await getJson(`${env.app.url}/api/poems`)).body.poems).to.have.length(1);
  });
});
