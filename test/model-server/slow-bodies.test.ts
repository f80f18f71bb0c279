import { expect } from 'chai';
import { sendAllThenRead, trickleThenRead } from '../support/http.js';
import { getJson, modelServerForSuite } from './helpers.js';

/** Bodies that stop arriving: refused in OpenAI's shape once silent for the idle limit; the server goes on. */
describe('model-server: bodies that stall', () => {
  const IDLE_MS = 300;
  const ms = modelServerForSuite({ bodyIdleTimeoutMs: IDLE_MS });
  const request = JSON.stringify({ model: 'strata-tiny', messages: [{ role: 'user', content: '5 6 7' }], max_tokens: 3 });
  const head = (framing: string) =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${framing}\r\nConnection: close\r\n\r\n`;

  const expectTimedOut = (answer: Awaited<ReturnType<typeof sendAllThenRead>>) => {
    expect(answer.error).to.not.equal('hang');
    expect(answer.statuses).to.deep.equal([408]);
    const body = JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4));
    expect(body.error).to.include({ type: 'invalid_request_error', code: 'request_timeout' });
  };

  it('headers and never a body (Content-Length): 408 request_timeout in OpenAI shape, the connection closed', async () => {
    expectTimedOut(await sendAllThenRead(ms.server.port, head(`Content-Length: ${request.length}`), 0, '', 10_000));
  });

  it('a chunked body that stops half-way: 408, and the server keeps answering', async () => {
    const half = request.slice(0, 20);
    expectTimedOut(await sendAllThenRead(ms.server.port, head('Transfer-Encoding: chunked') + `${half.length.toString(16)}\r\n${half}\r\n`, 0, '', 10_000));
    expect((await getJson(`${ms.base}/v1/models`)).status).to.equal(200);
  });

  it('a body trickled a byte at a time, each within the limit, is answered', async () => {
    const answer = await trickleThenRead(ms.server.port, head(`Content-Length: ${request.length}`), request, IDLE_MS / 10, 60_000);
    expect(answer.statuses).to.deep.equal([200]);
    expect(answer.text).to.include('"chat.completion"');
  });
});
