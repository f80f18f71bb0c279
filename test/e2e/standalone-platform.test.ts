// The whole platform of `npm start` in one process: the object store plus model serving and image
// search, each on its own port, with the poem app generating through the local model server.
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { startPlatform, type RunningPlatform } from '../../images/standalone/src/platform.js';
import { colourImage, makeImageDir, makeTestModel, PALETTE, tempDir } from '../image-search/support/fixtures.js';
import { mirrorPathOf } from '../../images/image-search/src/bucket-source.js';

interface Json {
  [key: string]: unknown;
}

async function call(url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Json }> {
  const res = await fetch(
    url,
    body === undefined ? { headers } : { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) },
  );
  return { status: res.status, json: (await res.json()) as Json };
}

describe('e2e: the standalone platform runs every service', function () {
  this.timeout(120_000);
  let platform: RunningPlatform;
  let dataDir: string;
  let imageDir: string;
  let colourFiles: Record<string, string[]>;

  before(async () => {
    dataDir = tempDir('standalone');
    ({ dir: imageDir, colourFiles } = await makeImageDir());
    platform = await startPlatform({
      dataDir,
      host: '127.0.0.1',
      ports: { gateway: 0, dataPlane: 0, controlPlane: 0, modelServer: 0, poemApp: 0, imageSearch: 0 },
      rootPassword: 'standalone-e2e-password',
      purgeSchedule: false,
      logLevel: 'silent',
      env: {
        IMAGE_FILE_DIR: imageDir,
        IMAGE_SEARCH_MODEL_DIR: makeTestModel(),
        IMAGE_SEARCH_INDEX_STRING: 'IVF4096,PQ32x8',
        // Images put under photos/incoming/ in the platform's own object store are indexed (events; no polling here).
        IMAGE_SEARCH_SOURCE_S3_URL: 's3://photos/incoming/',
        IMAGE_SEARCH_SOURCE_SYNC_SECONDS: '0',
      },
    });
  });

  after(async () => {
    await platform?.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(imageDir, { recursive: true, force: true });
  });

  it('starts the six services, each with its health, readiness and metrics endpoints', async () => {
    expect(Object.keys(platform.urls)).to.have.members(['control-plane', 'data-plane', 'gateway', 'model-server', 'poem-app', 'image-search']);
    for (const [name, url] of Object.entries(platform.urls)) {
      for (const probe of ['/healthz', '/readyz', '/metrics']) {
        const res = await fetch(url + probe);
        expect(res.status, `${name}${probe}`).to.equal(200);
        await res.arrayBuffer();
      }
    }
  });

  it('serves the OpenAI-compatible API of the tiny model', async () => {
    const { status, json } = await call(`${platform.urls['model-server']}/v1/chat/completions`, {
      model: 'strata-tiny',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
    });
    expect(status).to.equal(200);
    expect(json.object).to.equal('chat.completion');
    const content = (json.choices as Array<{ message: { content: string } }>)[0]!.message.content;
    expect(content).to.match(/^\d+( \d+)*$/);
  });

  it('keeps the tail of a prompt longer than the model context (standalone default) instead of refusing it', async () => {
    const words = Array.from({ length: 100 }, (_, i) => `word${i}`).join(' ');
    const { status, json } = await call(`${platform.urls['model-server']}/v1/chat/completions`, {
      model: 'strata-tiny',
      messages: [{ role: 'user', content: words }],
      max_tokens: 4,
    });
    expect(status, JSON.stringify(json)).to.equal(200);
    expect((json.usage as { prompt_tokens: number }).prompt_tokens).to.equal(64);
  });

  it('generates a poem in the poem app through the local model server and keeps it in history under the data dir', async () => {
    const generated = await call(`${platform.urls['poem-app']}/api/generate-poem`, { type: 'haiku', theme: 'rain on the sea' });
    expect(generated.status, JSON.stringify(generated.json)).to.equal(200);
    // The poem app's default upstream model is the built-in strata-verse: text, not token ids.
    expect(generated.json.model).to.equal('strata-verse');
    expect(generated.json.poem).to.be.a('string').and.match(/\p{L}/u);
    const saved = await call(`${platform.urls['poem-app']}/api/poems`, { type: 'haiku', theme: 'rain on the sea', content: generated.json.poem });
    expect(saved.status).to.equal(201);
    const list = await call(`${platform.urls['poem-app']}/api/poems`);
    expect((list.json.poems as Json[]).map((p) => p.id)).to.include(saved.json.id);
    expect(existsSync(path.join(dataDir, 'poem-app', 'poems.db'))).to.equal(true);
  });

  it('indexes images and finds them by text in image search, with the index under the data dir', async () => {
    const all = Object.values(colourFiles).flat();
    // Changing the index takes a token: the one the gateway issues at login.
    const refused = await call(`${platform.urls['image-search']}/api/index/add`, { image_paths: all });
    expect(refused.status).to.equal(401);
    const login = await call(`${platform.urls.gateway}/login`, { username: platform.rootUser, password: platform.rootPassword });
    const token = (login.json.data as { token: string }).token;
    const added = await call(`${platform.urls['image-search']}/api/index/add`, { image_paths: all }, { authorization: `Bearer ${token}` });
    expect(added.status, JSON.stringify(added.json)).to.equal(200);
    const found = await call(`${platform.urls['image-search']}/search`, { query: 'red', topk: 3 });
    expect(found.status).to.equal(200);
    const results = found.json.results as Array<{ path: string; distance: number }>;
    expect(results).to.have.length(3);
    expect(results.map((r) => r.path)).to.have.members(colourFiles.red!);
    const status = await call(`${platform.urls['image-search']}/api/index/status`);
    expect(status.json).to.deep.include({ totalVectors: all.length });
    expect(status.json.indexString).to.equal('IVF4096,PQ32x8');
    expect(existsSync(path.join(dataDir, 'image-search', 'index'))).to.equal(true);
  });

  it('indexes an image at once when it is put into the source bucket of the object store', async () => {
    const s3 = new S3Client({
      endpoint: platform.urls.gateway,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: platform.rootUser, secretAccessKey: platform.rootPassword },
    });
    try {
      await s3.send(new CreateBucketCommand({ Bucket: 'photos' }));
      await s3.send(
        new PutObjectCommand({ Bucket: 'photos', Key: 'incoming/blue-sky.png', Body: await colourImage(PALETTE.blue!, 7), ContentType: 'image/png' }),
      );
      // The bucket is the root's: only the root's tokens see its images (as S3 would serve them).
      const search = async (headers: Record<string, string> = {}) =>
        ((await call(`${platform.urls['image-search']}/search`, { query: 'blue', topk: 20 }, headers)).json.results as Array<{ path: string; url: string }>) ??
        [];
      const loginAs = async (username: string, password: string) => ({
        authorization: `Bearer ${((await call(`${platform.urls.gateway}/login`, { username, password })).json.data as { token: string }).token}`,
      });
      const root = await loginAs(platform.rootUser, platform.rootPassword);
      // The bucket's mirror keeps each object at a path made from its key (bucket-source.ts).
      const mirrored = mirrorPathOf('photos', 'incoming/blue-sky.png');
      const deadline = Date.now() + 60_000;
      let paths: string[] = [];
      while (Date.now() < deadline) {
        const found = { json: { results: await search(root) } };
        paths = (found.json.results as Array<{ path: string }>).map((r) => r.path);
        if (paths.some((p) => p === mirrored)) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(
        paths.some((p) => p === mirrored),
        paths.join(', '),
      ).to.equal(true);
      const own = (await search(root)).find((r) => r.path === mirrored)!;
      expect((await fetch(platform.urls['image-search'] + own.url)).status).to.equal(200);
      // Anonymous callers and another user see nothing of it, and get none of its bytes.
      const created = await call(`${platform.urls.gateway}/admin/users`, { username: 'mallory', password: 'mallory-password-1' }, root);
      expect(created.status, JSON.stringify(created.json)).to.equal(201);
      const other = await loginAs('mallory', 'mallory-password-1');
      for (const headers of [{}, other]) {
        expect((await search(headers)).map((r) => r.path).filter((p) => p.startsWith('s3/'))).to.deep.equal([]);
        expect((await fetch(platform.urls['image-search'] + own.url.replace(/\?.*/, ''), { headers })).status).to.be.oneOf([401, 403]);
      }
    } finally {
      s3.destroy();
    }
  });
});
