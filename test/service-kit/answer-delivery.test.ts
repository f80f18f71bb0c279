import type http from 'node:http';
import { expect } from 'chai';
import { sendAllThenRead } from '../support/http.js';
import { createLogger, createRegistry, listen, type RunningService } from '../../images/service-kit/src/index.js';

describe('service kit: answers are delivered, in request order', () => {
  let running: RunningService | undefined;
  /** Bodies the handler stored (it stores a PUT's body once the body has come whole). */
  const stored = new Map<string, string>();
  before(async () => {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.url === '/refuse') {
        // Refused before its body is read (as an authentication failure is).
        res.statusCode = 403;
        res.end('refused');
        return;
      }
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('error', () => undefined);
      req.on('end', () => {
        // Storing takes a while: later bytes on the connection arrive meanwhile.
        setTimeout(() => {
          stored.set(req.url ?? '', Buffer.concat(parts).toString());
          res.end('stored');
        }, 150);
      });
    };
    running = await listen(handler, {
      name: 'delivery-test',
      logger: createLogger('delivery-test', 'silent'),
      registry: createRegistry('t'),
      port: 0,
      host: '127.0.0.1',
    });
  });
  after(async () => running?.stop(1000));

  it('a PUT followed on its connection by bytes that are no request gets its own 200 first, then the 400 and a close', async () => {
    const body = 'pipelined body';
    const head = `PUT /pipelined HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const got = await sendAllThenRead(running!.port, head, 0, 'GARBAGE\u0001 not http\r\n\r\n');
    expect(got.statuses, got.text).to.deep.equal([200, 400]);
    expect(got.text).to.match(/^HTTP\/1\.1 200 OK\r\n[\s\S]*stored(HTTP\/1\.1 400 Bad Request\r\nConnection: close\r\n)/);
    expect(stored.get('/pipelined')).to.equal(body);
  });

  it('an answer given before a large body was read reaches a client that reads only after sending it all (Connection: close)', async () => {
    const size = 32 * 1024 * 1024;
    const got = await sendAllThenRead(running!.port, `PUT /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: ${size}\r\nconnection: close\r\n\r\n`, size);
    expect(got.statuses, `${got.error ?? ''} ${got.text}`).to.deep.equal([403]);
    expect(got.error).to.equal(undefined);
  });

  it('an answer given before a large body was read closes the connection (no unbounded drain) and still arrives', async () => {
    const size = 32 * 1024 * 1024;
    const got = await sendAllThenRead(running!.port, `PUT /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: ${size}\r\n\r\n`, size);
    expect(got.statuses, `${got.error ?? ''} ${got.text}`).to.deep.equal([403]);
    expect(got.text).to.match(/\r\nConnection: close\r\n/);
    expect(got.error).to.equal(undefined);
  });

  it('a request that follows a body refused early on its connection is not served (its answer could not be sent)', async () => {
    const size = 1024 * 1024;
    const late = 'PUT /after-refusal HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\nlate';
    const got = await sendAllThenRead(running!.port, `PUT /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: ${size}\r\n\r\n`, size, late);
    expect(got.statuses, `${got.error ?? ''} ${got.text}`).to.deep.equal([403]);
    // Give a handler that wrongly ran the time it takes to store.
    await new Promise((r) => setTimeout(r, 400));
    expect(stored.has('/after-refusal')).to.equal(false);
  });

  it('a chunked body whose framing breaks is answered 400 and the client reads it, though it kept sending', async () => {
    const head = `PUT /broken HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n`;
    const got = await sendAllThenRead(running!.port, head, 16 * 1024 * 1024);
    expect(got.statuses, `${got.error ?? ''} ${got.text}`).to.deep.equal([400]);
    expect(got.error).to.equal(undefined);
    expect(stored.has('/broken')).to.equal(false);
  });
});
