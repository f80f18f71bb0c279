import net from 'node:net';
import { expect } from 'chai';
import { eventually } from '../support/eventually.js';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { AUTH_HEADER, startTestImageSearch } from './support/fixtures.js';

/** Queries in flight are shared between callers: one caller's flood is refused past its share, the others are served. */
describe('image-search: one caller cannot take every query slot', () => {
  for (const trustProxy of [undefined, 'loopback']) {
    describe(
      trustProxy ? 'behind an ingress it trusts (STRATA_TRUST_PROXY): anonymous callers told apart by X-Forwarded-For' : 'no proxy trusted (the default)',
      () => {
        slotsSuite(trustProxy);
      },
    );
  }
});

function slotsSuite(trustProxy: string | undefined) {
  const env = fixtureHooks(
    'suite',
    () =>
      startTestImageSearch(`query-slots-${trustProxy ?? 'direct'}`, {
        IMAGE_SEARCH_QUERY_SLOTS: 4,
        IMAGE_SEARCH_QUERY_SLOTS_PER_CALLER: 2,
        ...(trustProxy ? { STRATA_TRUST_PROXY: trustProxy } : {}),
      }),
    (f) => f.close(),
  );
  const HOLDER = { 'x-forwarded-for': '203.0.113.1' };

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
          'POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 203.0.113.1\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\nContent-Disposition: form-data; name="query_img"; filename="q.png"\r\n\r\n',
        );
      });
      socket.on('error', () => undefined);
      return socket;
    });
    try {
      const refused = await eventually(async () => {
        const answer = await search(HOLDER);
        expect(answer.status).to.equal(429);
        return answer;
      }, 'the third anonymous query refused');
      expect(refused.body.error?.code).to.equal('busy');
      expect(refused.retryAfter).to.equal('1');
      expect((await search(AUTH_HEADER)).status).to.equal(200);
      // Another client behind the same peer: its own caller only where the header is believed.
      expect((await search({ 'x-forwarded-for': '203.0.113.2' })).status).to.equal(trustProxy ? 200 : 429);
    } finally {
      for (const socket of held) socket.destroy();
    }
    // Their queries end with their connections: the caller is served again.
    await eventually(async () => expect((await search(HOLDER)).status).to.equal(200), 'anonymous searches served again');
  });
}
