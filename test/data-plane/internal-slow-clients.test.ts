import type http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';
import { eventually } from '../support/eventually.js';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { sendAllThenRead } from '../support/http.js';
import { controlPlaneEnvSchema } from '../../images/control-plane/src/config.js';
import { dataPlaneEnvSchema } from '../../images/data-plane/src/config.js';
import { startObjectLayer, TOKEN } from './harness.js';

/** On a raw connection: `head` and `body`, then nothing more; what the server said (its start), and whether it closed before `deadlineMs`. */
function exchange(port: number, head: string, opts: { body?: Buffer; deadlineMs?: number } = {}) {
  return new Promise<{ text: string; closed: boolean }>((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1');
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: Buffer.concat(chunks).toString('latin1').slice(0, 4096), closed });
    };
    const timer = setTimeout(() => done(false), opts.deadlineMs ?? 10_000);
    socket.on('error', () => undefined);
    socket.on('data', (c: Buffer) => {
      if (chunks.length < 4) chunks.push(c);
    });
    socket.on('end', () => done(true));
    socket.on('close', () => done(true));
    socket.on('connect', () => {
      socket.write(head);
      if (opts.body) socket.write(opts.body);
    });
  });
}

/** The internal APIs against callers that hold their side (a frozen gateway): the token first, no body or answer held for good. */
describe('internal APIs: bodies that never come, readers that never read', function () {
  this.timeout(60_000);
  const IDLE_MS = 300;
  const layer = fixtureHooks(
    'suite',
    () => startObjectLayer('postgres', { idleTimeoutMs: IDLE_MS }),
    (l) => l.stop(),
  );
  const token = `x-strata-internal-token: ${TOKEN}\r\n`;

  it('the limits are a setting of both entrypoints: STRATA_INTERNAL_IDLE_TIMEOUT_MS (default 60 s; 0: none)', () => {
    for (const schema of [dataPlaneEnvSchema, controlPlaneEnvSchema]) {
      const setting = schema.shape.STRATA_INTERNAL_IDLE_TIMEOUT_MS;
      expect(setting.parse(undefined)).to.equal(60_000);
      expect(setting.parse('0')).to.equal(0);
    }
  });

  it('data plane: an object body that stops half-way is refused RequestTimeout, its connection closed, nothing stored', async () => {
    expect((await layer.cpFetch('PUT', '/internal/buckets/stall', { owner: 'alice' })).status).to.be.oneOf([200, 409]);
    const head = `PUT /internal/objects/stall/k HTTP/1.1\r\nHost: x\r\n${token}x-strata-owner: alice\r\nContent-Length: 100000\r\n\r\n`;
    const answer = await exchange(layer.dp.port, head, { body: Buffer.alloc(50_000, 1) });
    expect(answer.closed).to.equal(true);
    expect(answer.text).to.match(/^HTTP\/1\.1 400 /);
    expect(answer.text).to.include('"RequestTimeout"');
    expect((await layer.dpFetch('HEAD', '/internal/objects/stall/k')).status).to.equal(404);
  });

  it('control plane: a JSON body that never comes whole is refused RequestTimeout, its connection closed, nothing done', async () => {
    const head = `PUT /internal/buckets/stall2 HTTP/1.1\r\nHost: x\r\n${token}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
    const answer = await exchange(layer.cp.port, head, { body: Buffer.from('{"owner":') });
    expect(answer.closed).to.equal(true);
    expect(answer.text).to.match(/^HTTP\/1\.1 400 /);
    expect(answer.text).to.include('"RequestTimeout"');
    expect((await layer.cpFetch('PUT', '/internal/buckets/stall2', { owner: 'alice' })).status).to.equal(200);
  });

  it('data plane: a large object whose reader never reads is cut with its connection', async () => {
    expect((await layer.cpFetch('PUT', '/internal/buckets/stall', { owner: 'alice' })).status).to.be.oneOf([200, 409]);
    // More than the kernel buffers between the two ends of a loopback connection (a few MB).
    const body = Buffer.alloc(32 * 1024 * 1024, 7);
    const put = await layer.dpFetch('PUT', '/internal/objects/stall/big', body, { 'x-strata-owner': 'alice', 'content-length': String(body.length) });
    expect(put.status).to.equal(200);
    // Seen from the server: the answer ends unfinished (the client, reading nothing, would not see the close).
    let cut = false;
    const watch = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.url === '/internal/objects/stall/big') res.once('close', () => (cut = !res.writableFinished));
    };
    layer.dp.server.on('request', watch);
    const socket = net.connect(layer.dp.port, '127.0.0.1', () => {
      socket.pause();
      socket.write(`GET /internal/objects/stall/big HTTP/1.1\r\nHost: x\r\n${token}\r\n`);
    });
    socket.on('error', () => undefined);
    try {
      await eventually(() => cut, 'the stalled answer cut', 10_000);
    } finally {
      layer.dp.server.off('request', watch);
      socket.destroy();
    }
  });

  it('without the token: 401 at once on every route, the body not waited for; health, readiness and metrics need none and change nothing', async () => {
    for (const port of [layer.dp.port, layer.cp.port]) {
      for (const [method, target] of [
        ['PUT', '/internal/objects/stall/k'],
        ['GET', '/internal/objects/stall/big'],
        ['PUT', '/internal/buckets/x'],
        ['DELETE', '/internal/buckets/stall'],
        ['POST', '/internal/users'],
        ['POST', '/internal/purge'],
        // (Express routes paths case-insensitively: the token check covers every spelling the routes answer.)
        ['POST', '/Internal/users'],
        ['PUT', '/INTERNAL/objects/stall/k'],
      ]) {
        // A body declared and never sent: the refusal does not wait for it.
        const answer = await sendAllThenRead(port, `${method} ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n`, 0, '', 5_000);
        expect(answer.statuses, `${port} ${method} ${target}`).to.deep.equal([401]);
      }
      for (const target of ['/healthz', '/readyz', '/metrics']) {
        expect((await fetch(`http://127.0.0.1:${port}${target}`)).status, `${port} ${target}`).to.equal(200);
        expect((await fetch(`http://127.0.0.1:${port}${target}`, { method: 'POST', body: 'x' })).status, `${port} POST ${target}`).to.equal(404);
      }
    }
  });
});
