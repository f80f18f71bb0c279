import net from 'node:net';
import { expect } from 'chai';
import { eventually } from '../support/eventually.js';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { AUTH_HEADER, startTestImageSearch } from './support/fixtures.js';

/** Queries in flight are shared between callers: one caller's flood is refused past its share, the others are served. */
describe('image-search: one caller cannot take every query slot', () => {
  const env = fixtureHooks(
    'suite',
    () => startTestImageSearch('query-slots', { IMAGE_SEARCH_QUERY_SLOTS: 4, IMAGE_SEARCH_QUERY_SLOTS_PER_CALLER: 2 }),
    (f) => f.close(),
  );

  const search = async (headers: Record<string, string> = {}) => {
    const res = await fetch(`${env.service.url}/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query: 'red' }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: { code: string } } };
  };

  it("an anonymous caller holding its queries (uploads that never end) is refused 429 busy; an admin's search is answered", async () => {
    // Two image queries whose bodies never come whole: each holds its query until the connection goes.
    const held = Array.from({ length: 2 }, () => {
      const socket = net.connect(env.service.port, '127.0.0.1', () => {
        socket.write(
          'POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\nContent-Disposition: form-data; name="query_img"; filename="q.png"\r\n\r\n',
        );
      });
      socket.on('error', () => undefined);
      return socket;
    });
    try {
      const refused = await eventually(async () => {
        const answer = await search();
        expect(answer.status).to.equal(429);
        return answer;
      }, 'the third anonymous query refused');
      expect(refused.body.error?.code).to.equal('busy');
      expect(refused.retryAfter).to.equal('1');
      expect((await search(AUTH_HEADER)).status).to.equal(200);
    } finally {
      for (const socket of held) socket.destroy();
    }
    // Their queries end with their connections: the caller is served again.
    await eventually(async () => expect((await search()).status).to.equal(200), 'anonymous searches served again');
  });
});
