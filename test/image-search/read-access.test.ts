import { expect } from 'chai';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import jwt from 'jsonwebtoken';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { mirrorPathOf } from '../../images/image-search/src/bucket-source.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { AUTH_HEADER, colourImage, makeImageDir, makeTestModel, PALETTE, tempDir, TEST_API_KEY, type ImageDir } from './support/fixtures.js';
import { startFakeLlm } from './support/fake-llm.js';
import { bucketSourceEnv, S3RVER_OWNER, startS3rver, until, type TestS3 } from './support/s3rver.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const JWT_SECRET = 'image-search-read-access-jwt-secret-0123456789';
const tokenOf = (sub: string) => ({ authorization: `Bearer ${jwt.sign({ sub, ak: `AK-${sub}` }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 300 })}` });
const BUCKET_PATHS = ['cams/red-a.png', 'cams/red-b.png', 'cams/blue-a.png'].map((key) => mirrorPathOf('photos', key));

describe('image-search: results and image bytes only for callers who may read their source (the object store’s permissions)', function () {
  this.timeout(120_000);
  let s3: TestS3;
  let images: ImageDir;
  const dirs: string[] = [];
  /** The bucket's owner (the user image search reads it as) and another tenant, signed when the file's tests start. */
  let OWNER: Record<string, string>;
  let OTHER: Record<string, string>;

  /** Image search over the local test images and the private bucket s3://photos/cams, once both are indexed. */
  const start = async (env: Record<string, string> = {}): Promise<RunningService> => {
    const [modelDir, indexDir] = [makeTestModel(), tempDir('read-access-index')];
    dirs.push(modelDir, indexDir);
    const service = await startImageSearch({
      env: { ...bucketSourceEnv(s3, 's3://photos/cams', { modelDir, imageDir: images.dir, indexDir }), STRATA_JWT_SECRET: JWT_SECRET, ...env },
      host: '127.0.0.1',
      logger: pino({ level: 'silent' }),
    });
    await until(async () =>
      ((s: Json) => (s.source.lastSync && !s.source.syncing ? true : undefined))(await call(service, 'GET', '/api/status', undefined, AUTH_HEADER)),
    );
    const local = [...images.colourFiles.red, ...images.colourFiles.blue];
    expect((await call(service, 'POST', '/api/index/add', { image_paths: local }, AUTH_HEADER)).added).to.have.length(6);
    return service;
  };

  async function call(service: RunningService, method: string, route: string, payload?: unknown, headers: Record<string, string> = {}): Promise<Json> {
    const response = await fetch(service.url + route, {
      method,
      headers: { ...headers, ...(payload === undefined || payload instanceof FormData ? {} : { 'content-type': 'application/json' }) },
      body: payload === undefined ? undefined : payload instanceof FormData ? payload : JSON.stringify(payload),
    });
    return { status: response.status, ...(await response.json()) };
  }
  const paths = (results: Array<{ path: string }>) => results.map((r) => r.path);
  const fromBucket = (results: Array<{ path: string }>) => paths(results).filter((p) => p.startsWith('s3/'));

  before(async () => {
    OWNER = tokenOf(S3RVER_OWNER);
    OTHER = tokenOf('mallory');
    s3 = await startS3rver(['photos']);
    images = await makeImageDir();
    dirs.push(images.dir);
    await s3.put('photos', 'cams/red-a.png', await colourImage(PALETTE.red, 501));
    await s3.put('photos', 'cams/red-b.png', await colourImage(PALETTE.red, 502));
    await s3.put('photos', 'cams/blue-a.png', await colourImage(PALETTE.blue, 503));
  });
  after(async () => {
    await s3?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('shows a private bucket to nobody but its owner (and admins): search, image search, more like this, RAG, tools and bytes', async () => {
    const service = await start();
    try {
      const searchAs = async (headers: Record<string, string>, query = 'red', topk = 4) =>
        (await call(service, 'POST', '/search', { query, topk }, headers)).results;
      const admin = await searchAs(AUTH_HEADER, 'red', 20);
      expect(fromBucket(admin).sort()).to.deep.equal([...BUCKET_PATHS].sort());
      const bucketRed = admin.find((r: { path: string }) => r.path === BUCKET_PATHS[0]);

      for (const [who, headers] of [
        ['anonymous', {}],
        ['another tenant', OTHER],
      ] as const) {
        // Filtered before top-k: still 4 results (the local ones), none from the bucket.
        const results = await searchAs(headers);
        expect(results, who).to.have.length(4);
        expect(fromBucket(results), who).to.deep.equal([]);
        const form = new FormData();
        form.append('query_img', new Blob([new Uint8Array(await colourImage(PALETTE.red, 504))], { type: 'image/png' }), 'red.png');
        form.append('topk', '20');
        expect(fromBucket((await call(service, 'POST', '/search', form, headers)).results), who).to.deep.equal([]);
        expect(fromBucket((await call(service, 'POST', '/api/search/rag', { query: 'red', topk: 20 }, headers)).results), who).to.deep.equal([]);
        const tool = await call(service, 'POST', '/api/tools/call', { tool: 'search_by_text', arguments: { query: 'red', topk: 20 } }, headers);
        expect(fromBucket(tool.result.results), who).to.deep.equal([]);
        // More like an image they may not read: as unknown as one that does not exist.
        const similar = await call(service, 'POST', '/api/tools/call', { tool: 'search_by_image_id', arguments: { image_id: bucketRed.id } }, headers);
        expect(similar.status, who).to.equal(404);
        const localRed = results[0];
        const like = await call(service, 'POST', '/api/tools/call', { tool: 'search_by_image_id', arguments: { image_id: localRed.id, topk: 20 } }, headers);
        expect(fromBucket(like.result.results), who).to.deep.equal([]);
      }

      // Bytes: refused before the file is looked at (a missing key answers the same), however the path is spelt.
      for (const route of [
        `/images/${BUCKET_PATHS[0]}`,
        `/images//${BUCKET_PATHS[0]}`,
        `/images/${BUCKET_PATHS[0].replace('photos/', 'photos/./')}`,
        '/images/s3/photos/missing.png',
      ]) {
        expect((await fetch(service.url + route)).status, `anonymous ${route}`).to.equal(401);
        expect((await fetch(service.url + route, { headers: OTHER })).status, `another tenant ${route}`).to.equal(403);
      }
      expect((await fetch(`${service.url}/images/${images.colourFiles.red[0]}`)).status).to.equal(200);

      // The owner sees their images, with URLs signed for them that serve the bytes (an <img> sends no token).
      const own = await searchAs(OWNER, 'red', 20);
      expect(fromBucket(own).sort()).to.deep.equal([...BUCKET_PATHS].sort());
      const ownRed = own.find((r: { path: string }) => r.path === BUCKET_PATHS[0]);
      expect(ownRed.url).to.match(new RegExp(`^/images/${BUCKET_PATHS[0]}\\?expires=\\d+&signature=[\\w-]+$`));
      const bytes = await fetch(service.url + ownRed.url);
      expect(bytes.status).to.equal(200);
      expect(Buffer.from(await bytes.arrayBuffer()).equals(readFileSync(path.join(images.dir, BUCKET_PATHS[0])))).to.equal(true);
      // Another first character (a fixed one would equal the real signature's once in 64 runs).
      const tampered = ownRed.url.replace(/signature=(.)/, (_: string, c: string) => `signature=${c === 'x' ? 'y' : 'x'}`);
      expect(tampered).to.not.equal(ownRed.url);
      expect((await fetch(service.url + tampered)).status).to.equal(401);
      expect((await fetch(service.url + ownRed.url.replace(BUCKET_PATHS[0], BUCKET_PATHS[1]))).status).to.equal(401);
      expect((await fetch(`${service.url}/images/${BUCKET_PATHS[0]}`, { headers: OWNER })).status).to.equal(200);
      const ownSimilar = await call(service, 'POST', '/api/tools/call', { tool: 'search_by_image_id', arguments: { image_id: bucketRed.id, topk: 20 } }, OWNER);
      expect(fromBucket(ownSimilar.result.results).sort()).to.deep.equal([BUCKET_PATHS[1], BUCKET_PATHS[2]].sort());

      // A token that is presented but not valid is refused, not taken as anonymous.
      expect((await call(service, 'POST', '/search', { query: 'red' }, { authorization: 'Bearer not-a-token' })).status).to.equal(401);
    } finally {
      await service.stop();
    }
  });

  it('tells callers other than admins nothing about server paths or the source’s objects', async () => {
    const service = await start();
    try {
      const secrets = [images.dir, ...dirs];
      for (const headers of [{}, OWNER]) {
        for (const route of ['/api/status', '/api/index/status']) {
          const text = await (await fetch(service.url + route, { headers })).text();
          for (const dir of secrets) expect(text, route).to.not.include(dir);
          expect(text, route).to.not.include('red-a.png');
        }
      }
      const described = await call(service, 'GET', '/api/status');
      expect(described.source).to.deep.equal({ kind: 'bucket' });
      expect(described.model.dir).to.equal(null);
      const asAdmin = await call(service, 'GET', '/api/status', undefined, AUTH_HEADER);
      expect(asAdmin.imageDir).to.equal(images.dir);
      expect(asAdmin.source.owner).to.equal(S3RVER_OWNER);
      expect((await call(service, 'GET', '/api/index/status', undefined, AUTH_HEADER)).imageDir).to.equal(images.dir);
    } finally {
      await service.stop();
    }
  });

  it('gives the LLM features (RAG answers, the chat’s tool calls) only what the caller may read', async () => {
    const llm = await startFakeLlm('test-key');
    const service = await start({ LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key' });
    try {
      for (const [who, headers, sees] of [
        ['anonymous', {}, false],
        ['another tenant', OTHER, false],
        ['the owner', OWNER, true],
      ] as const) {
        const qa = await call(service, 'POST', '/api/rag/qa', { question: 'which are red?', topk: 20 }, headers);
        expect(qa.status, who).to.equal(200);
        expect(fromBucket(qa.results).length > 0, who).to.equal(sees);
        // What the answer was built from: the prompt the LLM got names only images the caller may read.
        expect(JSON.stringify(llm.requests.at(-1)!.body.messages).includes('s3/photos'), who).to.equal(sees);
        const chat = await call(service, 'POST', '/api/chat', { message: 'find red' }, headers);
        expect(chat.status, who).to.equal(200);
        expect(chat.toolCalls[0].tool).to.equal('search_by_text');
        expect(chat.toolCalls[0].result.results, who).to.have.length(3);
        if (!sees) expect(fromBucket(chat.toolCalls[0].result.results), who).to.deep.equal([]);
      }
    } finally {
      await service.stop();
      await llm.close();
    }
  });

  it('names no server path to anonymous callers when the model is missing (status, readiness, search)', async () => {
    const [emptyModelDir, indexDir] = [tempDir('read-access-no-model'), tempDir('read-access-no-model-index')];
    dirs.push(emptyModelDir, indexDir);
    const service = await startImageSearch({
      env: { IMAGE_SEARCH_API_KEY: TEST_API_KEY },
      PORT: 0,
      host: '127.0.0.1',
      IMAGE_SEARCH_MODEL_DIR: emptyModelDir,
      IMAGE_FILE_DIR: images.dir,
      IMAGE_SEARCH_INDEX_DIR: indexDir,
      logger: pino({ level: 'silent' }),
    });
    try {
      const answers = [
        await fetch(`${service.url}/readyz`),
        await fetch(`${service.url}/api/status`),
        await fetch(`${service.url}/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"red"}' }),
      ];
      for (const answer of answers) {
        const text = await answer.text();
        expect(text).to.match(/CLIP model missing|model/);
        expect(text, answer.url).to.not.include(emptyModelDir);
      }
      expect((await call(service, 'GET', '/api/status', undefined, AUTH_HEADER)).model.error).to.include(emptyModelDir);
    } finally {
      await service.stop();
    }
  });

  it('shows anonymous callers exactly the sources configured as public (IMAGE_SEARCH_PUBLIC_SOURCES)', async () => {
    const service = await start({ IMAGE_SEARCH_PUBLIC_SOURCES: 'photos' });
    try {
      const results = (await call(service, 'POST', '/search', { query: 'red', topk: 20 })).results;
      expect(paths(results).sort()).to.deep.equal([...BUCKET_PATHS].sort());
      expect(results[0].url).to.not.include('signature');
      expect((await fetch(service.url + results[0].url)).status).to.equal(200);
      expect((await fetch(`${service.url}/images/${images.colourFiles.red[0]}`)).status).to.equal(401);
      // Any valid token reads the local directory.
      expect((await fetch(`${service.url}/images/${images.colourFiles.red[0]}`, { headers: OTHER })).status).to.equal(200);
    } finally {
      await service.stop();
    }
  });
});
