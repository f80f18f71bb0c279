import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { minTransferRate, type SlowTransfer } from '../../images/gateway/src/middleware/min-rate.js';
import { capConnections, type ConnectionRefusal } from '../../images/gateway/src/flow-control/connections.js';
import { eventually } from '../gateway-flow-control/support.js';

/** 64 KiB/s over 300 ms windows: at least 19 660 bytes a window. */
const RATE = { minBytesPerSecond: 65536, windowMs: 300 };

/** Answer on a raw connection: what came back once the connection ended. */
function exchange(port: number, head: string, send: (s: net.Socket) => void = () => undefined): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let answer = '';
    s.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => resolve(answer));
    s.write(head);
    send(s);
  });
}

describe('gateway: minimum transfer rate and connection caps', function () {
  this.timeout(30_000);
  let server: http.Server;
  let port: number;
  const cuts: SlowTransfer[] = [];
  let handler: (req: http.IncomingMessage, res: http.ServerResponse) => void;

  before(async () => {
    const rate = minTransferRate(
      () => RATE,
      (_err, _req, res) => {
        res.statusCode = 400;
        res.end('RequestTimeout');
      },
      (_res, what) => cuts.push(what),
    );
    server = http.createServer((req, res) => rate(req, res, () => handler(req, res)));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => (cuts.length = 0));

  it('ends a trickled body with 400 RequestTimeout', async () => {
    handler = (req, res) => {
      req.on('data', () => undefined);
      req.on('end', () => res.end('stored'));
    };
    const answer = await exchange(port, 'PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx', (s) => {
      const drip = setInterval(() => s.write('x'), 50);
      s.once('close', () => clearInterval(drip));
    });
    expect(answer).to.match(/^HTTP\/1\.1 400/);
    expect(cuts).to.deep.equal(['slow-body']);
  });

  it('times each request of a kept-alive connection from its own start: a quick one, a pause, then a trickled body is cut', async () => {
    handler = (req, res) => {
      req.on('data', () => undefined);
      req.on('end', () => res.end('stored'));
    };
    const answer = await exchange(port, 'PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx', (s) => {
      // The first answer, then a pause longer than a window (an idle connection is no slow transfer), then the trickle.
      s.once('data', () =>
        setTimeout(() => {
          s.write('PUT /b HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx');
          const drip = setInterval(() => s.write('x'), 50);
          s.once('close', () => clearInterval(drip));
        }, 2 * RATE.windowMs),
      );
    });
    expect(answer).to.match(/^HTTP\/1\.1 200[\s\S]*stored[\s\S]*HTTP\/1\.1 400/);
    expect(cuts).to.deep.equal(['slow-body']);
  });

  it('does not blame the client for a slow upstream: an answer that starts late, a body its reader holds back', async () => {
    handler = (req, res) => {
      // The body into a reader taking 4 KiB every 100 ms (a slow upstream), then an answer after a second's wait.
      const slow = new Writable({ highWaterMark: 1024, write: (_c, _e, cb) => void setTimeout(cb, 100) });
      req.pipe(slow);
      slow.on('finish', () => setTimeout(() => res.end('done'), 1000));
    };
    const body = Buffer.alloc(64 * 1024, 1);
    const answer = await exchange(port, `PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`, (s) => s.write(body));
    expect(answer).to.match(/^HTTP\/1\.1 200[\s\S]*done$/);
    expect(cuts).to.deep.equal([]);
  });

  it('closes the connection of a client that does not read its answer', async () => {
    let closedBeforeEnd = false;
    handler = (_req, res) => {
      res.on('close', () => (closedBeforeEnd = !res.writableFinished));
      const chunk = Buffer.alloc(64 * 1024);
      const more = () => {
        while (res.write(chunk));
      };
      res.on('drain', more);
      more();
    };
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    s.pause();
    s.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n');
    try {
      await eventually(() => closedBeforeEnd, 'the unread answer cut', 10_000);
      expect(cuts).to.deep.equal(['slow-reader']);
    } finally {
      s.destroy();
    }
  });

  it('caps connections per address and in all, counting each refusal', async () => {
    const capped = http.createServer((_req, res) => res.end('ok'));
    const refusals: ConnectionRefusal[] = [];
    let limits = { perAddress: 2, total: 100 };
    capConnections(
      capped,
      () => limits,
      (r) => refusals.push(r),
    );
    await new Promise<void>((r) => capped.listen(0, '127.0.0.1', r));
    const cport = (capped.address() as AddressInfo).port;
    const open = (localAddress: string) =>
      new Promise<{ s: net.Socket; closed: () => boolean }>((resolve) => {
        let closed = false;
        const s = net.connect({ port: cport, host: '127.0.0.1', localAddress });
        s.on('error', () => undefined);
        s.on('close', () => (closed = true));
        s.on('connect', () => resolve({ s, closed: () => closed }));
      });
    const sockets: net.Socket[] = [];
    try {
      const a = [await open('127.0.0.2'), await open('127.0.0.2'), await open('127.0.0.2')];
      sockets.push(...a.map((x) => x.s));
      await eventually(() => a[2]!.closed(), 'the third connection from one address closed');
      const other = await open('127.0.0.3');
      sockets.push(other.s);
      limits = { perAddress: 2, total: 3 };
      const fourth = await open('127.0.0.4');
      sockets.push(fourth.s);
      await eventually(() => fourth.closed(), 'the connection past the total closed');
      expect(a[0]!.closed() || a[1]!.closed() || other.closed()).to.equal(false);
      expect(refusals).to.deep.equal(['connections-per-address', 'connections-total']);
      // A closed connection frees its place.
      other.s.destroy();
      await eventually(async () => /^HTTP\/1\.1 200/.test(await exchange(cport, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')), 'a place freed');
    } finally {
      for (const s of sockets) s.destroy();
      capped.closeAllConnections();
      await new Promise((r) => capped.close(r));
    }
  });
});
