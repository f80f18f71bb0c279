import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';
import { createLogger, createRegistry, InProcessAgent, listen, PipeEnd, type RunningService } from '../../images/service-kit/src/index.js';
import { eventually } from '../support/eventually.js';

interface Answer {
  status: number;
  body: Buffer;
  headers: http.IncomingHttpHeaders;
}

/** One request through `agent`; the body (if any) is written in `chunks`. */
function request(agent: http.Agent, url: string, opts: { method?: string; chunks?: Buffer[] } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', agent }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    for (const c of opts.chunks ?? []) req.write(c);
    req.end();
  });
}

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/**
 * Services of one process reach each other's listen()ed servers through in-memory connections
 * (InProcessAgent): the same HTTP exchange, no socket, and TCP for everything else.
 */
describe('service kit: in-process HTTP between services of one process', () => {
  let running: RunningService | undefined;
  /** What the server saw of each request: its connection and whether that is an in-process one. */
  const seen: Array<{ url: string; socket: unknown; inProcess: boolean }> = [];
  /** Requests the handler holds until the test releases them. */
  const held: Array<() => void> = [];
  const big = randomBytes(8 << 20);

  const handler: http.RequestListener = (req, res) => {
    seen.push({ url: req.url ?? '', socket: req.socket, inProcess: req.socket instanceof PipeEnd });
    if (req.url === '/echo-md5') {
      const hash = createHash('md5');
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        hash.update(c);
        bytes += c.length;
      });
      req.on('end', () => res.end(JSON.stringify({ md5: hash.digest('hex'), bytes })));
      return;
    }
    if (req.url === '/big') {
      res.setHeader('content-length', big.length);
      // In pieces, as a file stream would, honouring backpressure.
      let at = 0;
      const next = () => {
        while (at < big.length) {
          const piece = big.subarray(at, at + (1 << 20));
          at += piece.length;
          if (!res.write(piece)) return void res.once('drain', next);
        }
        res.end();
      };
      next();
      return;
    }
    if (req.url === '/endless') {
      // Writes until the client goes away; records how far it got ahead of the reader.
      res.setHeader('content-type', 'application/octet-stream');
      const piece = Buffer.alloc(256 << 10);
      let written = 0;
      const next = () => {
        // Bounded, so that a pipe without backpressure fails the test instead of looping forever.
        while (!res.destroyed && written < 64 << 20) {
          written += piece.length;
          endless.written = written;
          if (!res.write(piece)) return void res.once('drain', next);
        }
      };
      res.once('close', () => (endless.closed = true));
      next();
      return;
    }
    if (req.url === '/held') {
      held.push(() => res.end('released'));
      return;
    }
    res.end(`hello ${req.method} ${req.url}`);
  };
  const endless = { written: 0, closed: false };

  const start = async () => {
    running = await listen(handler, {
      name: 'pipe-test',
      logger: createLogger('pipe-test', 'silent'),
      registry: createRegistry('pipe-test'),
      port: 0,
      host: '127.0.0.1',
    });
    return running;
  };

  beforeEach(() => {
    seen.length = 0;
  });
  afterEach(async () => {
    delete process.env.STRATA_IN_PROCESS_HTTP;
    await running?.stop(1000);
    running = undefined;
  });

  it('reaches a listen()ed server of this process without a socket, and keeps the connection alive between requests', async () => {
    const { url } = await start();
    const agent = new InProcessAgent({ keepAlive: true });
    const a = await request(agent, `${url}/one`);
    const b = await request(agent, `${url}/two`, { method: 'POST', chunks: [Buffer.from('x')] });
    expect([a.status, a.body.toString()]).to.deep.equal([200, 'hello GET /one']);
    expect([b.status, b.body.toString()]).to.deep.equal([200, 'hello POST /two']);
    expect(seen.map((s) => s.inProcess)).to.deep.equal([true, true]);
    expect(seen[0]!.socket).to.equal(seen[1]!.socket);
    agent.destroy();
  });

  it('uses TCP for targets this process does not serve, and when STRATA_IN_PROCESS_HTTP=0', async () => {
    const { url } = await start();
    const outside = http.createServer((req, res) => res.end(`outside ${req.socket instanceof net.Socket}`));
    await new Promise<void>((resolve) => outside.listen(0, '127.0.0.1', resolve));
    const agent = new InProcessAgent({ keepAlive: true });
    try {
      const r = await request(agent, `http://127.0.0.1:${(outside.address() as net.AddressInfo).port}/`);
      expect(r.body.toString()).to.equal('outside true');
      process.env.STRATA_IN_PROCESS_HTTP = '0';
      await request(new InProcessAgent(), `${url}/tcp`);
      expect(seen.map((s) => s.inProcess)).to.deep.equal([false]);
    } finally {
      agent.destroy();
      outside.close();
    }
  });

  it('carries large bodies both ways intact', async () => {
    const { url } = await start();
    const agent = new InProcessAgent({ keepAlive: true });
    const chunks = Array.from({ length: 64 }, (_, i) => big.subarray(i * (128 << 10), (i + 1) * (128 << 10)));
    const up = await request(agent, `${url}/echo-md5`, { method: 'PUT', chunks });
    expect(JSON.parse(up.body.toString())).to.deep.equal({ md5: md5(big), bytes: big.length });
    const down = await request(agent, `${url}/big`);
    expect(down.headers['content-length']).to.equal(String(big.length));
    expect(md5(down.body)).to.equal(md5(big));
    expect(seen.every((s) => s.inProcess)).to.equal(true);
    agent.destroy();
  });

  it('applies backpressure: a reader that stops reading stops the writer, and going away closes its answer', async () => {
    const { url } = await start();
    const agent = new InProcessAgent({ keepAlive: true });
    const req = http.get(`${url}/endless`, { agent });
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    res.pause();
    await new Promise((r) => setTimeout(r, 200));
    // The writer is held at its buffers' size (a few MiB at most), not running away.
    expect(endless.written)
      .to.be.greaterThan(0)
      .and.below(8 << 20);
    const held = endless.written;
    await new Promise((r) => setTimeout(r, 100));
    expect(endless.written).to.equal(held);
    expect(endless.closed).to.equal(false);
    req.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect(endless.closed).to.equal(true);
    agent.destroy();
  });

  it('a client that goes away mid-upload ends the request on the server side', async () => {
    const { url } = await start();
    const agent = new InProcessAgent({ keepAlive: true });
    let serverSaw: 'aborted' | 'complete' | undefined;
    running!.server.prependListener('request', (req: http.IncomingMessage) => {
      req.once('close', () => (serverSaw = req.complete ? 'complete' : 'aborted'));
    });
    const req = http.request(`${url}/echo-md5`, { method: 'PUT', agent, headers: { 'content-length': 1 << 20 } });
    req.on('error', () => undefined);
    req.write(Buffer.alloc(1000));
    await new Promise((r) => setTimeout(r, 50));
    req.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect(serverSaw).to.equal('aborted');
    agent.destroy();
  });

  it('stop() lets an in-process request in flight finish, then closes the idle connections and resolves', async () => {
    const { url } = await start();
    const agent = new InProcessAgent({ keepAlive: true });
    const other = new InProcessAgent({ keepAlive: true });
    await request(other, `${url}/warm`); // an idle keep-alive connection
    const idle = seen[0]!.socket as PipeEnd;
    const inFlight = request(agent, `${url}/held`);
    await new Promise((r) => setTimeout(r, 20));
    expect(held).to.have.length(1);
    let stopped = false;
    const stopping = running!.stop(5000).then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 100));
    expect(idle.destroyed).to.equal(true);
    expect(stopped).to.equal(false);
    held.shift()!();
    expect((await inFlight).body.toString()).to.equal('released');
    await stopping;
    expect(stopped).to.equal(true);
    running = undefined;
    // Gone from this process: the next call goes to the closed TCP port and fails as it would anyway.
    const err = await request(agent, `${url}/after`).catch((e: NodeJS.ErrnoException) => e);
    expect((err as NodeJS.ErrnoException).code).to.equal('ECONNREFUSED');
    agent.destroy();
    other.destroy();
  });

  it('stop() ends an in-process request still running when its grace period is over', async () => {
    const { url } = await start();
    const agent = new InProcessAgent({ keepAlive: true });
    const stuck = request(agent, `${url}/held`).catch((e: NodeJS.ErrnoException) => e);
    await new Promise((r) => setTimeout(r, 20));
    await running!.stop(200);
    running = undefined;
    held.length = 0;
    const err = (await stuck) as NodeJS.ErrnoException;
    expect(err).to.be.instanceOf(Error);
    expect(err.code).to.equal('ECONNRESET');
    agent.destroy();
  });

  it('a server closed without stop() is not reached in-process any more', async () => {
    const { url, server } = await start();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const err = await request(new InProcessAgent(), `${url}/closed`).catch((e: NodeJS.ErrnoException) => e);
    expect((err as NodeJS.ErrnoException).code).to.equal('ECONNREFUSED');
    expect(seen).to.deep.equal([]);
  });

  it('an idle connection ends after the server keep-alive timeout, and the agent opens a new one', async () => {
    const { url, server } = await start();
    server.keepAliveTimeout = 100;
    const agent = new InProcessAgent({ keepAlive: true });
    await request(agent, `${url}/first`);
    const first = seen[0]!.socket as PipeEnd;
    // Polled, not slept past (was a fixed 1.5 s): the 100 ms keep-alive timeout is the server's own.
    await eventually(() => first.destroyed, 'the idle connection to end');
    expect((await request(agent, `${url}/second`)).status).to.equal(200);
    expect(seen[1]!.socket).to.not.equal(first);
    agent.destroy();
  });
});
