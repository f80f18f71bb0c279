import { expect } from 'chai';
import { rmSync } from 'node:fs';
import jwt from 'jsonwebtoken';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { ADMIN_ROLE } from '../../images/image-search/src/http/auth.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { makeImageDir, makeTestModel, tempDir, TEST_API_KEY } from './support/fixtures.js';
import { until } from './support/s3rver.js';

const JWT_SECRET = 'image-search-access-jwt-secret-0123456789';

async function post(
  base: string,
  route: string,
  payload: unknown,
  headers: Record<string, string> = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<{ status: number; body: any; authenticate: string | null }> {
  const response = await fetch(base + route, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(payload) });
  return { status: response.status, body: await response.json(), authenticate: response.headers.get('www-authenticate') };
}

describe("image-search: changing the index takes the admin key or an admin's token, not any login; reads of the public directory stay open", function () {
  this.timeout(60_000);
  const dirs: string[] = [];
  let images: Awaited<ReturnType<typeof makeImageDir>>;
  let modelDir: string;
  const start = async (env: Record<string, string>): Promise<RunningService> => {
    const indexDir = tempDir('image-search-access');
    dirs.push(indexDir);
    return startImageSearch({
      env,
      PORT: 0,
      host: '127.0.0.1',
      IMAGE_SEARCH_MODEL_DIR: modelDir,
      IMAGE_FILE_DIR: images.dir,
      IMAGE_SEARCH_INDEX_DIR: indexDir,
      logger: pino({ level: 'silent' }),
    });
  };

  before(async () => {
    modelDir = makeTestModel();
    images = await makeImageDir();
    dirs.push(modelDir, images.dir);
  });
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("refuses state changes without a valid token (401) or with an ordinary user's (403); takes the key, an admin user's or the operator's token", async () => {
    const service = await start({ IMAGE_SEARCH_API_KEY: TEST_API_KEY, STRATA_JWT_SECRET: JWT_SECRET, IMAGE_SEARCH_ADMIN_USERS: 'root, ops' });
    const base = service.url;
    const red = images.colourFiles.red[0];
    const gatewayToken = (secret: string, expiresIn: number, sub = 'alice') => jwt.sign({ sub, ak: `AK${sub}` }, secret, { algorithm: 'HS256', expiresIn });
    const writes = [
      ['/api/index/add', { image_paths: [red] }],
      ['/api/index/remove', { image_ids: [0] }],
      ['/api/index/merge', {}],
      ['/api/index/rebuild', {}],
      ['/api/tools/call', { tool: 'add_images', arguments: { image_paths: [red] } }],
    ] as const;
    try {
      const refusals: Array<[string, Record<string, string>]> = [
        ['no token', {}],
        ['a wrong key', { authorization: 'Bearer not-the-key-at-all-000000' }],
        ['a token of another secret', { authorization: `Bearer ${gatewayToken('another-secret-of-at-least-32-characters', 60)}` }],
        ['an expired token', { authorization: `Bearer ${gatewayToken(JWT_SECRET, -10)}` }],
        ['a token without an expiry', { authorization: `Bearer ${jwt.sign({ sub: 'alice', ak: 'AKALICE' }, JWT_SECRET, { algorithm: 'HS256' })}` }],
      ];
      for (const [what, headers] of refusals) {
        for (const [route, payload] of writes) {
          const refused = await post(base, route, payload, headers);
          expect(refused.status, `${route} with ${what}`).to.equal(401);
          expect(refused.body.error.code).to.equal('unauthorized');
          expect(refused.authenticate).to.match(/^Bearer/);
        }
      }
      // Any login is not enough: an ordinary user's valid gateway token may not change the shared index.
      for (const [route, payload] of writes) {
        const refused = await post(base, route, payload, { authorization: `Bearer ${gatewayToken(JWT_SECRET, 60)}` });
        expect(refused.status, `${route} with an ordinary user's token`).to.equal(403);
        expect(refused.body.error.message).to.match(/alice may not change the index/);
      }
      expect(
        (await post(base, '/api/index/add', { image_paths: [red] }, { authorization: `Bearer ${gatewayToken(JWT_SECRET, -10)}` })).body.error.message,
      ).to.match(/expired/);
      const status = (await (await fetch(`${base}/api/index/status`)).json()) as { totalVectors: number; job: unknown };
      expect(status).to.deep.include({ totalVectors: 0, job: null });

      // The key (as a bearer token or X-API-Key), an admin user's gateway token and the operator's role token may.
      expect((await post(base, '/api/index/add', { image_paths: [red] }, { authorization: `Bearer ${TEST_API_KEY}` })).status).to.equal(200);
      expect((await post(base, '/api/index/add', { image_paths: [images.colourFiles.red[1]] }, { 'x-api-key': TEST_API_KEY })).status).to.equal(200);
      const byAdminUser = await post(
        base,
        '/api/tools/call',
        { tool: 'add_images', arguments: { image_paths: [images.colourFiles.blue[0]] } },
        { authorization: `Bearer ${gatewayToken(JWT_SECRET, 60, 'ops')}` },
      );
      expect(byAdminUser.status).to.equal(200);
      expect(byAdminUser.body.result.added).to.have.length(1);
      const operatorToken = jwt.sign({ sub: 'strata-operator', role: ADMIN_ROLE }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 60 });
      const merged = await post(base, '/api/index/merge', {}, { authorization: `Bearer ${operatorToken}` });
      expect(merged.status).to.equal(202);
      await until(async () =>
        ((s: { job: { state: string } | null }) => (s.job?.state !== 'running' ? true : undefined))(await (await fetch(`${base}/api/index/status`)).json()),
      );

      // Reads need nothing.
      expect((await post(base, '/search', { query: 'red', topk: 2 })).status).to.equal(200);
      expect((await post(base, '/api/tools/call', { tool: 'search_by_text', arguments: { query: 'red' } })).status).to.equal(200);
      const described = (await (await fetch(`${base}/api/status`)).json()) as { auth: unknown; index: { totalVectors: number } };
      expect(described.auth).to.deep.equal({
        writes: 'token',
        accepts: ['IMAGE_SEARCH_API_KEY', 'gateway token of an admin user (IMAGE_SEARCH_ADMIN_USERS: 2)'],
        // Where a token comes from: the gateway's /login (the page's "How to get a token").
        loginUrl: 'http://127.0.0.1:9000/login',
      });
      expect(described.index.totalVectors).to.equal(3);
    } finally {
      await service.stop();
    }
  });

  it('with neither a key nor a JWT secret configured, nothing changes the index over HTTP (403)', async () => {
    const service = await start({});
    try {
      const refused = await post(service.url, '/api/index/add', { image_paths: [images.colourFiles.red[0]] }, { authorization: `Bearer ${TEST_API_KEY}` });
      expect(refused.status).to.equal(403);
      expect(refused.body.error.message).to.match(/set IMAGE_SEARCH_API_KEY or STRATA_JWT_SECRET/);
      expect((await post(service.url, '/api/index/merge', {})).status).to.equal(403);
      expect((await post(service.url, '/search', { query: 'red' })).status).to.equal(200);
    } finally {
      await service.stop();
    }
  });
});
