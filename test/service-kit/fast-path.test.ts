import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express, { type NextFunction, type Request, type Response } from 'express';
import { createApp, createLogger, createRegistry, listen, withFastPath, type ChainHandler, type RunningService } from '../../images/service-kit/src/index.js';

/** The kit's router bypass: claimed requests run the given chain on Express's request/response objects, the rest go to the app. */
describe('service kit: fast path past the router', () => {
  let server: http.Server;
  let base: string;
  const seen: string[] = [];

  before(async () => {
    const app = express();
    app.set('query parser', 'extended');
    app.get('/express-only', (_req, res) => void res.json({ by: 'express' }));
    const chain: ChainHandler[] = [
      (req, res, next) => {
        seen.push(`first ${req.params.name}`);
        res.locals.order = ['first'];
        next();
      },
      async (req, res, next) => {
        await new Promise((r) => setTimeout(r, 1));
        (res.locals.order as string[]).push('second');
        if (req.query.fail === 'next') return next(new Error('passed to next'));
        if (req.query.fail === 'throw') throw new Error('thrown');
        if (req.query.fail === 'reject') return Promise.reject(new Error('rejected'));
        next();
      },
      (req: Request, res: Response) => {
        // Express's own request/response API works: query parsing, app settings, res.status().json().
        res.status(201).json({
          order: res.locals.order,
          route: (req as Request & { route: { path: string } }).route.path,
          name: req.params.name,
          q: req.query.q,
          app: req.app.get('query parser'),
        });
      },
    ];
    const onError = (err: unknown, _req: Request, res: Response, _next: NextFunction) => void res.status(500).json({ error: (err as Error).message });
    const listener = withFastPath(
      app,
      (req) => {
        const m = /^\/fast\/([^/?]+)/.exec(req.url ?? '');
        return m ? { route: { path: '/fast/:name' }, params: { name: decodeURIComponent(m[1]!) } } : undefined;
      },
      chain,
      onError,
    );
    expect(listener.locals).to.equal(app.locals);
    server = http.createServer(listener);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('runs the chain in order for a claimed request, with the route, params and Express API', async () => {
    const r = await fetch(`${base}/fast/a%20b?q=1`);
    expect(r.status).to.equal(201);
    expect(await r.json()).to.deep.equal({ order: ['first', 'second'], route: '/fast/:name', name: 'a b', q: '1', app: 'extended' });
    expect(seen).to.include('first a b');
  });

  it('hands an error passed to next, thrown or rejected to the error handler, once, and stops the chain', async () => {
    for (const how of ['next', 'throw', 'reject']) {
      const r = await fetch(`${base}/fast/x?fail=${how}`);
      expect(r.status, how).to.equal(500);
      expect(await r.json()).to.deep.equal({ error: { next: 'passed to next', throw: 'thrown', reject: 'rejected' }[how] });
    }
  });

  it('leaves requests it does not claim to the Express app (routes and 404s as before)', async () => {
    const r = await fetch(`${base}/express-only`);
    expect(await r.json()).to.deep.equal({ by: 'express' });
    expect((await fetch(`${base}/nowhere`)).status).to.equal(404);
  });
});

/** listen() makes the server's requests and responses with the app's Express API from the start: no prototype swap per request. */
describe('service kit: requests born with the Express API', () => {
  let running: RunningService;
  const prototypes: Array<{ arrival: object; handled: object; response: object; responseHandled: object }> = [];

  before(async () => {
    const app = createApp({ name: 'born', logger: createLogger('born', 'silent'), registry: createRegistry('born') });
    app.set('answer', 42);
    app.get('/express/:id', (req, res) => {
      res.status(202).json({
        id: req.params.id,
        header: req.get('x-probe'),
        path: req.path,
        q: req.query.q,
        setting: req.app.get('answer'),
        node: req instanceof http.IncomingMessage,
      });
    });
    const listener = withFastPath(
      app,
      (req) => (req.url?.startsWith('/fast') ? {} : undefined),
      [(req, res) => void res.status(201).json({ header: req.get('x-probe'), path: req.path, setting: req.app.get('answer') })],
      (err, _req, res) => void res.status(500).json({ error: String(err) }),
    );
    // What listen() serves: record each request's prototypes on arrival and once answered.
    const recording = Object.assign(
      (req: http.IncomingMessage, res: http.ServerResponse) => {
        const entry = { arrival: Object.getPrototypeOf(req) as object, handled: {}, response: Object.getPrototypeOf(res) as object, responseHandled: {} };
        res.on('finish', () => {
          entry.handled = Object.getPrototypeOf(req) as object;
          entry.responseHandled = Object.getPrototypeOf(res) as object;
          prototypes.push(entry);
        });
        listener(req, res);
      },
      { locals: listener.locals, app },
    );
    running = await listen(recording, { name: 'born', logger: createLogger('born', 'silent'), registry: createRegistry('born'), port: 0, host: '127.0.0.1' });
  });
  after(() => running.stop(100));

  it('serves Express routes and fast-path chains with Express API on both', async () => {
    const viaExpress = await fetch(`${running.url}/express/7?q=z`, { headers: { 'x-probe': 'p1' } });
    expect(viaExpress.status).to.equal(202);
    expect(await viaExpress.json()).to.deep.equal({ id: '7', header: 'p1', path: '/express/7', q: 'z', setting: 42, node: true });
    const fast = await fetch(`${running.url}/fast/x`, { headers: { 'x-probe': 'p2' } });
    expect(fast.status).to.equal(201);
    expect(await fast.json()).to.deep.equal({ header: 'p2', path: '/fast/x', setting: 42 });
  });

  it('never changes a request or response prototype after Node made the objects', async () => {
    prototypes.length = 0;
    for (const path of ['/express/1', '/fast/1', '/healthz', '/nowhere']) await (await fetch(`${running.url}${path}`)).arrayBuffer();
    await new Promise((r) => setTimeout(r, 20));
    expect(prototypes).to.have.length(4);
    for (const p of prototypes) {
      expect(p.handled).to.equal(p.arrival);
      expect(p.responseHandled).to.equal(p.response);
      expect(typeof (p.arrival as { get?: unknown }).get).to.equal('function');
      expect(typeof (p.response as { json?: unknown }).json).to.equal('function');
    }
  });
});
