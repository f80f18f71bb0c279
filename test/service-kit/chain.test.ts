import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { runChain, sendJson, type ChainHandler } from '../../images/service-kit/src/index.js';

/** The kit's chain runner: connect-style handlers on Node's own request and response, no framework. */
describe('service kit: handler chains on node:http', () => {
  let server: http.Server;
  let base: string;

  before(async () => {
    const order = new WeakMap<http.ServerResponse, string[]>();
    const chain: ChainHandler[] = [
      (_req, res, next) => {
        order.set(res, ['first']);
        next();
      },
      async (req, res, next) => {
        await new Promise((r) => setTimeout(r, 1));
        order.get(res)!.push('second');
        const fail = new URL(req.url ?? '/', 'http://x').searchParams.get('fail');
        if (fail === 'next') return next(new Error('passed to next'));
        if (fail === 'throw') throw new Error('thrown');
        if (fail === 'reject') return Promise.reject(new Error('rejected'));
        next();
      },
      (_req, res) => sendJson(res, { order: order.get(res) }, 201),
    ];
    const onError = (err: unknown, _req: http.IncomingMessage, res: http.ServerResponse) => sendJson(res, { error: (err as Error).message }, 500);
    server = http.createServer((req, res) => runChain(chain, req, res, onError));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('runs the handlers in order; the last one answers (JSON with its length and charset)', async () => {
    const r = await fetch(`${base}/x`);
    expect(r.status).to.equal(201);
    expect(r.headers.get('content-type')).to.equal('application/json; charset=utf-8');
    expect(r.headers.get('content-length')).to.equal(String(Buffer.byteLength(JSON.stringify({ order: ['first', 'second'] }))));
    expect(await r.json()).to.deep.equal({ order: ['first', 'second'] });
  });

  it('hands an error passed to next, thrown or rejected to the error handler, once, and stops the chain', async () => {
    for (const how of ['next', 'throw', 'reject']) {
      const r = await fetch(`${base}/x?fail=${how}`);
      expect(r.status, how).to.equal(500);
      expect(await r.json()).to.deep.equal({ error: { next: 'passed to next', throw: 'thrown', reject: 'rejected' }[how] });
    }
  });

  it('an error handler that throws cuts the connection instead of leaving an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const broken = http.createServer((req, res) =>
      runChain([async () => Promise.reject(new Error('handler failed'))], req, res, () => {
        throw new Error('renderer failed');
      }),
    );
    try {
      await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', () => resolve()));
      const outcome = await fetch(`http://127.0.0.1:${(broken.address() as AddressInfo).port}/`, { signal: AbortSignal.timeout(5000) }).then(
        (r) => `answered ${r.status}`,
        (err: Error) => (err.name === 'TimeoutError' ? 'hung' : 'cut'),
      );
      await new Promise((r) => setImmediate(r));
      expect(outcome).to.equal('cut');
      expect(unhandled).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      broken.closeAllConnections();
      await new Promise<void>((resolve) => broken.close(() => resolve()));
    }
  });
});
