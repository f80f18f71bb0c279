import type http from 'node:http';
import path from 'node:path';
import { expect } from 'chai';
import { createLogger, createRegistry, listen, sendJson, type RunningService } from '../../images/service-kit/src/index.js';
import { startTestImageSearch, type TestImageSearch } from '../image-search/support/fixtures.js';
import { modelServerForSuite } from '../model-server/helpers.js';
import { startFakeOpenAI, type FakeOpenAI } from '../poem-app/support/fake-openai.js';
import { startTestPoemApp, tempDir } from '../poem-app/support/poem-app-harness.js';
import { httpExchange } from '../support/http.js';

/** `method path` to `service` with exactly these headers (Host included, as a DNS-rebinding page's browser would send it). */
async function send(
  service: { url: string },
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const answer = await httpExchange(
    service.url,
    {
      method,
      path: target,
      headers: { ...headers, ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }) },
      setHost: !('host' in headers),
    },
    text,
  );
  return { status: answer.status, json: answer.body ? (JSON.parse(answer.body) as Record<string, unknown>) : {} };
}

const portOf = (url: string) => new URL(url).port;

describe('service kit: Host and Origin checks on loopback (DNS-rebinding protection)', () => {
  const logger = createLogger('loopback-guard-test', 'silent');
  const started: RunningService[] = [];
  const serve = async (host: string, allowedHosts?: string[]) => {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => sendJson(res, { ok: true, method: req.method }, 200);
    const service = await listen(handler, { name: 'guarded', logger, registry: createRegistry('guarded'), port: 0, host, hostCheck: { allowedHosts } });
    started.push(service);
    return service;
  };
  after(async () => {
    for (const s of started) await s.stop();
  });

  it('on loopback, answers only loopback names, the bound name and the configured ones in Host', async () => {
    const service = await serve('127.0.0.1', ['studio.lan']);
    const port = portOf(service.url);
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      'LOCALHOST',
      `app.localhost:${port}`,
      `127.0.0.5:${port}`,
      `studio.lan:${port}`,
      'Studio.LAN.',
    ]) {
      expect((await send(service, 'GET', '/', { host })).status, host).to.equal(200);
    }
    for (const host of [`rebind.attacker.example:${port}`, '10.0.0.1', 'localhost.attacker.example', `attacker.example@127.0.0.1:${port}`, '127.0.0.1/x', '']) {
      const refused = await send(service, 'GET', '/', { host });
      expect(refused.status, host).to.equal(403);
      expect(refused.json).to.have.nested.property('error.code', 'forbidden_host');
    }
  });

  it('on loopback, refuses a state-changing request from another site’s Origin; same-origin and loopback origins pass', async () => {
    const service = await serve('127.0.0.1');
    const host = `127.0.0.1:${portOf(service.url)}`;
    expect((await send(service, 'POST', '/', { host, origin: 'https://attacker.example' })).status).to.equal(403);
    expect((await send(service, 'DELETE', '/', { host, origin: 'null' })).status).to.equal(403);
    expect((await send(service, 'POST', '/', { host, origin: `http://${host}` })).status).to.equal(200);
    expect((await send(service, 'POST', '/', { host, origin: 'http://localhost:5173' })).status).to.equal(200);
    expect((await send(service, 'POST', '/', { host })).status).to.equal(200);
    // Reading is left to the browser's same-origin policy (a page cannot read another origin's answer).
    expect((await send(service, 'GET', '/', { host, origin: 'https://attacker.example' })).status).to.equal(200);
  });

  it('checks nothing when the service listens beyond loopback, or when STRATA_ALLOWED_HOSTS is *', async () => {
    const everywhere = await serve('0.0.0.0');
    expect((await send(everywhere, 'POST', '/', { host: 'gateway.example.com', origin: 'https://other.example' })).status).to.equal(200);
    const any = await serve('127.0.0.1', ['*']);
    expect((await send(any, 'GET', '/', { host: 'rebind.attacker.example' })).status).to.equal(200);
  });

  describe('the poem app', () => {
    let upstream: FakeOpenAI;
    let app: RunningService;
    const tmp = tempDir('loopback-guard');
    before(async () => {
      upstream = await startFakeOpenAI();
      app = await startTestPoemApp(path.join(tmp.dir, 'poems.db'), upstream.baseUrl);
    });
    after(async () => {
      await app?.stop();
      await upstream?.close();
      tmp.remove();
    });

    it('keeps its history from a rebinding page and from cross-site requests', async () => {
      const saved = await send(app, 'POST', '/api/poems', {}, { type: 'haiku', theme: 'tide', content: 'salt wind' });
      expect(saved.status).to.equal(201);
      const id = saved.json.id as number;
      const rebound = await send(app, 'DELETE', `/api/poems/${id}`, { host: `rebind.attacker.example:${portOf(app.url)}` });
      expect(rebound.status).to.equal(403);
      expect(rebound.json).to.have.nested.property('error.code', 'forbidden_host');
      expect((await send(app, 'POST', '/api/poems', { origin: 'https://attacker.example' }, { type: 'haiku', theme: 'x', content: 'forged' })).status).to.equal(
        403,
      );
      expect((await send(app, 'GET', `/api/poems/${id}`, {})).json).to.include({ content: 'salt wind' });
      expect((await send(app, 'DELETE', `/api/poems/${id}`, { origin: app.url })).status).to.equal(204);
    });
  });

  describe('the model server', () => {
    const ms = modelServerForSuite({ modelNames: ['strata-tiny'] });

    it('refuses a rebinding page in OpenAI’s error shape, on the fast path of chat completions too', async () => {
      const host = `rebind.attacker.example:${portOf(ms.base)}`;
      const chat = await send(
        ms.server,
        'POST',
        '/v1/chat/completions',
        { host },
        { model: 'strata-tiny', messages: [{ role: 'user', content: '10 20' }], max_tokens: 2 },
      );
      expect(chat.status).to.equal(403);
      expect(chat.json.error).to.deep.include({ type: 'permission_error', code: 'forbidden_host', param: null });
      expect((await send(ms.server, 'GET', '/v1/models', { host })).status).to.equal(403);
      expect(
        (await send(ms.server, 'POST', '/v1/chat/completions', {}, { model: 'strata-tiny', messages: [{ role: 'user', content: '10 20' }], max_tokens: 2 }))
          .status,
      ).to.equal(200);
    });
  });

  describe('image search', () => {
    let search: TestImageSearch;
    before(async () => {
      search = await startTestImageSearch('loopback-guard');
    });
    after(async () => search?.close());

    it('refuses a rebinding page', async () => {
      const refused = await send(search.service, 'GET', '/api/status', { host: `rebind.attacker.example:${portOf(search.service.url)}` });
      expect(refused.status).to.equal(403);
      expect(refused.json).to.have.nested.property('error.code', 'forbidden_host');
      expect((await send(search.service, 'GET', '/api/status', {})).status).to.equal(200);
    });
  });
});
