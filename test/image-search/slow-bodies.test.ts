import { expect } from 'chai';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { sendAllThenRead, trickleThenRead } from '../support/http.js';
import { colourImage, startTestImageSearch } from './support/fixtures.js';

/** Query images and JSON bodies that stop arriving: refused once silent for the idle limit; the service goes on. */
describe('image-search: bodies that stall', () => {
  const IDLE_MS = 300;
  const env = fixtureHooks(
    'suite',
    // Through the environment, as the image is configured.
    () => startTestImageSearch('slow-bodies', { env: { IMAGE_SEARCH_BODY_IDLE_TIMEOUT_MS: String(IDLE_MS) } }),
    (f) => f.close(),
  );
  const boundary = 'strata-slow-body';
  const multipartHead = (length: number) =>
    `POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`;

  it('a query image that stops half-way: 408 request_timeout, the connection closed, and search keeps answering', async () => {
    const image = await colourImage([200, 30, 30], 1);
    const part = `--${boundary}\r\nContent-Disposition: form-data; name="query_img"; filename="q.png"\r\nContent-Type: image/png\r\n\r\n`;
    const length = part.length + image.length + `\r\n--${boundary}--\r\n`.length;
    const answer = await sendAllThenRead(
      env.service.port,
      multipartHead(length) + part + image.subarray(0, image.length >> 1).toString('latin1'),
      0,
      '',
      10_000,
    );
    expect(answer.error).to.not.equal('hang');
    expect(answer.statuses).to.deep.equal([408]);
    expect(answer.text).to.include('"request_timeout"');
    const search = await fetch(`${env.service.url}/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'red' }),
    });
    expect(search.status).to.equal(200);
  });

  it('headers and never a body: 408', async () => {
    const answer = await sendAllThenRead(env.service.port, multipartHead(1000), 0, '', 10_000);
    expect(answer.error).to.not.equal('hang');
    expect(answer.statuses).to.deep.equal([408]);
  });

  it('a JSON query trickled a byte at a time, each within the limit, is answered', async () => {
    const body = JSON.stringify({ query: 'a red square' });
    const head = `POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    const answer = await trickleThenRead(env.service.port, head, body, IDLE_MS / 10, 30_000);
    expect(answer.statuses).to.deep.equal([200]);
  });
});
