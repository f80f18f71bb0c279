import net from 'node:net';
import { expect } from 'chai';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { startTestImageSearch } from './support/fixtures.js';

/** A query form past its size bound: 413 at once and the connection closed, not the rest of the body read first. */
describe('image-search: uploads past the size limit', () => {
  const MAX_UPLOAD = 64 * 1024;
  const env = fixtureHooks(
    'suite',
    // The body idle limit far away: an answer within the deadline is the size bound's, not the idle limit's.
    () => startTestImageSearch('oversized-upload', { IMAGE_SEARCH_MAX_UPLOAD_BYTES: MAX_UPLOAD, bodyIdleTimeoutMs: 60_000 }),
    (f) => f.close(),
  );
  const boundary = 'strata-oversized';
  const head = (length: number) =>
    `POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${length}\r\n\r\n`;

  /** Send `head` and `sent`, then nothing more (the declared rest never comes): what the server said, and whether it closed its side. */
  const sendPart = (first: string, sent: Buffer, deadlineMs = 5_000) =>
    new Promise<{ text: string; ended: boolean }>((resolve) => {
      const chunks: Buffer[] = [];
      const socket = net.connect(env.service.port, '127.0.0.1');
      const done = (ended: boolean) => {
        clearTimeout(timer);
        socket.destroy();
        resolve({ text: Buffer.concat(chunks).toString('latin1'), ended });
      };
      const timer = setTimeout(() => done(false), deadlineMs);
      socket.on('error', () => undefined);
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('end', () => done(true));
      socket.on('connect', () => {
        socket.write(first);
        socket.write(sent);
      });
    });

  it('a query image past the limit: 413 before the rest of its (huge) body, the connection closed', async () => {
    const part = `--${boundary}\r\nContent-Disposition: form-data; name="query_img"; filename="q.png"\r\nContent-Type: image/png\r\n\r\n`;
    const answer = await sendPart(head(10 * MAX_UPLOAD) + part, Buffer.alloc(2 * MAX_UPLOAD, 1));
    expect(answer.text).to.match(/^HTTP\/1\.1 413 /);
    expect(answer.text).to.match(/connection: close/i);
    expect(answer.text).to.include('"payload_too_large"');
    expect(answer.ended).to.equal(true);
  });

  it('a body declared larger than any form may be: 413 without reading it', async () => {
    const answer = await sendPart(head(1024 ** 3), Buffer.from(`--${boundary}\r\n`));
    expect(answer.text).to.match(/^HTTP\/1\.1 413 /);
    expect(answer.ended).to.equal(true);
  });

  it('a flood of fields (no file) past the bound of a form: 413, the connection closed', async () => {
    const field = (i: number) => `--${boundary}\r\nContent-Disposition: form-data; name="f${i}"\r\n\r\n${'x'.repeat(60_000)}\r\n`;
    const fields = Buffer.from(Array.from({ length: 40 }, (_, i) => field(i)).join(''));
    const answer = await sendPart(head(fields.length * 4), fields);
    expect(answer.text).to.match(/^HTTP\/1\.1 413 /);
    expect(answer.ended).to.equal(true);
  });

  it('search still answers afterwards', async () => {
    const search = await fetch(`${env.service.url}/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'red' }),
    });
    expect(search.status).to.equal(200);
  });
});
