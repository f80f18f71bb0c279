import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { expect } from 'chai';
import { InternalHttp } from '../../images/gateway/src/clients/internal-http.js';
import { createLogger, createRegistry, handOverBody, listen, requestBody, type RunningService } from '../../images/service-kit/src/index.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** What the service saw of a request: whether its body came by reference, the bytes on the connection, the body's. */
interface Seen {
  handedOver: boolean;
  ownBytes: number;
  declared: string | undefined;
  md5?: string;
  bytes?: number;
  error?: string;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/** Writes `data` into a PassThrough in pieces, pausing `pauseMs` halfway. */
function trickle(data: Buffer, pauseMs = 0): PassThrough {
  const body = new PassThrough();
  void (async () => {
    for (let at = 0; at < data.length; at += 256 << 10) {
      if (pauseMs && at === (data.length >> 1) - ((data.length >> 1) % (256 << 10))) await new Promise((r) => setTimeout(r, pauseMs));
      if (!body.write(data.subarray(at, at + (256 << 10)))) await new Promise((r) => body.once('drain', r));
    }
    body.end();
  })();
  return body;
}

describe('gateway: large uploads to a service of this process go by reference (handOverBody)', () => {
  let running: RunningService;
  const seen: Seen[] = [];
  let silentAfterBody = false;

  before(async () => {
    running = await listen(
      (req, res) => {
        const body = requestBody(req);
        const entry: Seen = { handedOver: body !== req, ownBytes: 0, declared: req.headers['x-strata-content-length'] as string | undefined };
        seen.push(entry);
        if (body !== req) req.on('data', (c: Buffer) => (entry.ownBytes += c.length));
        readAll(body).then(
          (bytes) => {
            entry.md5 = md5(bytes);
            entry.bytes = bytes.length;
            if (!silentAfterBody) res.end(JSON.stringify({ md5: entry.md5 }));
          },
          (err: Error) => {
            entry.error = err.message;
            res.destroy();
          },
        );
      },
      { name: 'handover-test', logger: createLogger('handover-test', 'silent'), registry: createRegistry('handover-test'), port: 0, host: '127.0.0.1' },
    );
  });
  after(() => running.stop(1000));
  beforeEach(() => {
    seen.length = 0;
    silentAfterBody = false;
  });

  it('a large body is read by the service from the sender’s own stream: no byte of it on the connection, its length beside it', async () => {
    const client = new InternalHttp(running.url, 'token', 'test upstream');
    const data = randomBytes(3 << 20);
    const res = await client.stream({ method: 'PUT', path: '/up', headers: { 'content-length': data.length }, body: trickle(data) });
    expect(JSON.parse((await readAll(res)).toString())).to.deep.equal({ md5: md5(data) });
    expect(seen[0]).to.deep.include({ handedOver: true, ownBytes: 0, declared: String(data.length), bytes: data.length });
    client.close();
  });

  it('small bodies, bodies with trailers and bodies of unknown length still travel on the connection', async () => {
    const client = new InternalHttp(running.url, 'token', 'test upstream');
    const small = randomBytes(100_000);
    await readAll(await client.stream({ method: 'PUT', path: '/up', headers: { 'content-length': small.length }, body: trickle(small) }));
    const large = randomBytes(2 << 20);
    await readAll(
      await client.stream({
        method: 'PUT',
        path: '/up',
        headers: { 'x-strata-content-length': large.length },
        body: trickle(large),
        trailers: () => ({ 'x-t': '1' }),
      }),
    );
    await readAll(await client.stream({ method: 'PUT', path: '/up', body: trickle(large) }));
    expect(seen.map((s) => [s.handedOver, s.bytes])).to.deep.equal([
      [false, small.length],
      [false, large.length],
      [false, large.length],
    ]);
    client.close();
  });

  it('a request over TCP naming a handed-over body gets its own bytes, never that body', async () => {
    const waiting = new PassThrough();
    const handover = handOverBody(waiting);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${running.url}/up`, { method: 'PUT', headers: { [handover.header[0]]: handover.header[1], 'content-length': 3 } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end('abc');
    });
    expect(status).to.equal(200);
    expect(seen[0]).to.deep.include({ handedOver: false, bytes: 3 });
    handover.revoke();
  });

  it('a body that fails mid-way fails the service’s read and the call', async () => {
    const client = new InternalHttp(running.url, 'token', 'test upstream');
    const body = new PassThrough();
    const call = client.stream({ method: 'PUT', path: '/up', headers: { 'content-length': 4 << 20 }, body });
    body.write(randomBytes(1 << 20));
    while (!seen[0]) await new Promise((r) => setTimeout(r, 5));
    body.destroy(new Error('the client went away'));
    const err = await call.then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/went away/);
    while (!seen[0]!.error) await new Promise((r) => setTimeout(r, 5));
    expect(seen[0]!.error).to.match(/went away/);
    client.close();
  });

  it('a body that pauses longer than the idle limit still goes up; a service silent after the body fails the call', async () => {
    const client = new InternalHttp(running.url, 'token', 'test upstream', undefined, 200);
    const data = randomBytes(2 << 20);
    const res = await client.stream({ method: 'PUT', path: '/up', headers: { 'content-length': data.length }, body: trickle(data, 400) });
    expect(JSON.parse((await readAll(res)).toString())).to.deep.equal({ md5: md5(data) });
    silentAfterBody = true;
    const err = await client.stream({ method: 'PUT', path: '/up', headers: { 'content-length': data.length }, body: trickle(data) }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/unreachable|no byte/);
    client.close();
  });
});
