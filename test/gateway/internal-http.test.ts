import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { expect } from 'chai';
import { InternalHttp } from '../../images/gateway/src/clients/internal-http.js';
import { ClientGone } from '../../images/gateway/src/context.js';
import { isNotUpstreamFault } from '../../images/gateway/src/flow-control/breakers.js';
import { NO_ANSWER, S3Error } from '../../images/object-model/src/index.js';

describe('gateway: internal calls cancelled when the client goes away (ClientGone)', () => {
  let server: http.Server;
  let base: string;
  /** What the upstream saw of each request: bytes received and whether the body completed. */
  const seen: Array<{ bytes: number; complete: boolean; closed: Promise<void> }> = [];

  before(async () => {
    server = http.createServer((req, res) => {
      let bytes = 0;
      let closedResolve!: () => void;
      const entry = { bytes: 0, complete: false, closed: new Promise<void>((r) => (closedResolve = r)) };
      seen.push(entry);
      req.on('data', (c: Buffer) => (entry.bytes = bytes += c.length));
      req.on('end', () => {
        entry.complete = true;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ bytes }));
      });
      req.on('close', () => closedResolve());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  beforeEach(() => {
    seen.length = 0;
  });

  it('ends an upload in flight when fired: the call fails with AbortError, the upstream sees a cut body', async () => {
    const client = new InternalHttp(base, 'token', 'test upstream');
    const gone = new ClientGone();
    const body = new PassThrough();
    const call = client.stream({ method: 'PUT', path: '/up', headers: { 'content-length': 1_000_000 }, body, cancellation: gone });
    body.write(Buffer.alloc(100_000));
    while (!seen[0] || seen[0].bytes < 100_000) await new Promise((r) => setTimeout(r, 5));
    gone.fire();
    const err = await call.then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.name).to.equal('AbortError');
    await seen[0]!.closed;
    expect(seen[0]).to.include({ complete: false, bytes: 100_000 });
    client.close();
  });

  it('a call made after the client went away never completes its body; one that completed is left alone', async () => {
    const client = new InternalHttp(base, 'token', 'test upstream');
    const done = new ClientGone();
    const ok = await client.stream({ method: 'PUT', path: '/ok', headers: { 'content-length': 3 }, body: bodyOf('abc'), cancellation: done });
    let text = '';
    for await (const c of ok) text += String(c);
    expect(JSON.parse(text)).to.deep.equal({ bytes: 3 });
    done.fire(); // after completion: nothing to cancel, nothing thrown

    const gone = new ClientGone();
    gone.fire();
    const err = await client.stream({ method: 'PUT', path: '/late', headers: { 'content-length': 3 }, body: bodyOf('abc'), cancellation: gone }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.name).to.equal('AbortError');
    expect(seen.filter((s) => s.complete)).to.have.length(1);
    client.close();
  });

  it('runs each registered cancel once, at once when registered after firing', () => {
    const gone = new ClientGone();
    const calls: string[] = [];
    gone.onCancel(() => calls.push('a'));
    gone.fire();
    gone.fire();
    gone.onCancel(() => calls.push('b'));
    expect(calls).to.deep.equal(['a', 'b']);
    expect(gone.fired).to.equal(true);
  });
});

function bodyOf(text: string): PassThrough {
  const s = new PassThrough();
  s.end(text);
  return s;
}

describe('gateway: internal calls to a peer that stalls', () => {
  let server: net.Server;
  let base: string;
  const sockets = new Set<net.Socket>();

  before(async () => {
    // Accepts connections, reads what comes, answers nothing.
    server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.resume();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });

  it('a call (JSON, unguarded streamed upload) fails with ServiceUnavailable once its connection is idle, counted against the peer', async () => {
    const client = new InternalHttp(base, 'token-0123456789abcdef', 'data plane', undefined, 200);
    try {
      for (const call of [
        () => client.json('GET', '/internal/anything', NO_ANSWER, { long: true }),
        () => client.stream({ method: 'PUT', path: '/internal/objects/b/k', headers: { 'content-length': 3 }, body: Readable.from([Buffer.from('abc')]) }),
      ]) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).to.be.instanceOf(S3Error);
        expect((err as S3Error).code).to.equal('ServiceUnavailable');
        expect(isNotUpstreamFault(err)).to.equal(false);
      }
    } finally {
      client.close();
    }
  });
});
