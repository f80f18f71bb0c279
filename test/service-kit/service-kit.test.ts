import { expect } from 'chai';
import { z } from 'zod';
import { ConfigError, createApp, createLogger, createRegistry, env, httpMetrics, listen, loadConfig } from '../../images/service-kit/src/index.js';

describe('service-kit', () => {
  describe('loadConfig', () => {
    const schema = z.object({ PORT: env.port(9000), DEBUG: env.bool(false), NODES: env.list() });

    it('applies defaults and coerces values', () => {
      expect(loadConfig('t', schema, {})).to.deep.equal({ PORT: 9000, DEBUG: false, NODES: [] });
      expect(loadConfig('t', schema, { PORT: '81', DEBUG: 'yes', NODES: 'a:1, b:2' })).to.deep.equal({
        PORT: 81,
        DEBUG: true,
        NODES: ['a:1', 'b:2'],
      });
    });

    it('reports every invalid variable by name', () => {
      try {
        loadConfig('t', schema, { PORT: 'eighty', DEBUG: 'maybe' });
        expect.fail('should throw');
      } catch (err) {
        expect(err).to.be.instanceOf(ConfigError);
        const problems = (err as ConfigError).problems.join('\n');
        expect(problems)
          .to.match(/PORT/)
          .and.match(/"eighty"/);
        expect(problems)
          .to.match(/DEBUG/)
          .and.match(/"maybe"/);
      }
    });
  });

  describe('ops endpoints and graceful shutdown', () => {
    it('serves /healthz, /readyz with checks, /metrics, and drains in-flight requests on stop', async () => {
      const logger = createLogger('kit-test', 'silent');
      const registry = createRegistry('kit-test');
      let dbUp = true;
      let closed = false;
      const opts = {
        name: 'kit-test',
        logger,
        registry,
        readiness: {
          db: () => {
            if (!dbUp) throw new Error('db down');
          },
        },
        onClose: [() => void (closed = true)],
      };
      const app = createApp(opts);
      app.use(httpMetrics(registry).middleware);
      app.get('/slow', (_req, res) => {
        setTimeout(() => res.send('done'), 150);
      });
      const svc = await listen(app, { ...opts, port: 0, host: '127.0.0.1' });

      expect((await fetch(`${svc.url}/healthz`)).status).to.equal(200);
      expect((await fetch(`${svc.url}/readyz`)).status).to.equal(200);
      dbUp = false;
      const notReady = await fetch(`${svc.url}/readyz`);
      expect(notReady.status).to.equal(503);
      expect((await notReady.json()).checks.db).to.equal('db down');

      await (await fetch(`${svc.url}/slow`)).text();
      const metrics = await (await fetch(`${svc.url}/metrics`)).text();
      expect(metrics).to.match(/http_requests_total\{[^}]*route="\/slow"[^}]*\} 1/);
      expect(metrics).to.include('process_cpu_seconds_total');

      const inFlight = fetch(`${svc.url}/slow`).then((r) => r.text());
      await new Promise((r) => setTimeout(r, 30));
      await svc.stop();
      expect(await inFlight).to.equal('done');
      expect(closed).to.equal(true);
    });
  });
});

describe('service-kit shutdown with silent connections', () => {
  it('does not wait for a connection that never sent a request', async () => {
    const { createConnection } = await import('node:net');
    const logger = createLogger('kit-test', 'silent');
    const registry = createRegistry('kit-test', false);
    const opts = { name: 'kit-test', logger, registry };
    const svc = await listen(createApp(opts), { ...opts, port: 0, host: '127.0.0.1' });
    const socket = createConnection({ port: svc.port, host: '127.0.0.1' });
    await new Promise((r) => socket.once('connect', r));
    const closed = new Promise((r) => socket.once('close', r));
    let stoppedBeforeGrace = false;
    // A grace period far longer than the test timeout: stop() must finish by closing the idle socket.
    await Promise.race([svc.stop(120_000).then(() => (stoppedBeforeGrace = true)), new Promise((r) => setTimeout(r, 5_000))]);
    expect(stoppedBeforeGrace).to.equal(true);
    await closed;
  });
});
