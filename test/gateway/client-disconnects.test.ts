import net from 'node:net';
import { expect } from 'chai';
import pino from 'pino';
import { createRegistry } from '../../images/service-kit/src/index.js';
import { eventually } from '../gateway-flow-control/support.js';
import { FakeObjectLayer } from './fake-object-layer.js';
import { handlerApp } from './handler-app.js';

/** Issue 37 finding 10: a client that hangs up is no fault of the gateway and must not flood its log. */
describe('gateway: client disconnects', () => {
  it('are counted and logged at debug level, never as errors, however many a client causes', async () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
    const registry = createRegistry('client-disconnects-test', false);
    const layer = new FakeObjectLayer();
    layer.addBucket('drops', 'alice');
    const app = await handlerApp(layer, 'alice', { logger, registry });
    const { hostname, port } = new URL(app.url);
    const disconnects = async () => (await registry.getSingleMetric('strata_gateway_client_disconnects_total')?.get())?.values.reduce((n, v) => n + v.value, 0);
    try {
      for (let i = 0; i < 5; i++) {
        // A PUT that declares 1 MB, sends a little of it, and resets the connection.
        await new Promise<void>((resolve) => {
          const socket = net.connect({ host: hostname, port: Number(port) }, () => {
            socket.write(`PUT /drops/k${i} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Length: 1000000\r\n\r\n`);
            socket.write(Buffer.alloc(10_000, 1), () => setTimeout(() => socket.resetAndDestroy(), 20));
          });
          socket.on('error', () => undefined);
          socket.once('close', () => resolve());
        });
      }
      // Each request's access line is written once its answer is closed.
      await eventually(() => lines.filter((l) => l.msg === 'request').length === 5, 'five requests closed');
      expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).to.deep.equal([]);
      expect(lines.filter((l) => l.msg === 'client went away')).to.have.length(5);
      expect(await disconnects()).to.equal(5);
      expect((await app.fetch('GET', '/drops/k0')).status).to.equal(404);
    } finally {
      await app.close();
    }
  });
});
