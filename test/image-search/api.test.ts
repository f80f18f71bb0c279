import { expect } from 'chai';
import http from 'node:http';
import { existsSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startImageSearch, type StartImageSearchOptions } from '../../images/image-search/src/app.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { AUTH_HEADER, colourImage, makeImageDir, makeTestModel, tempDir, testServiceOptions } from './support/fixtures.js';

interface Result {
  id: number;
  path: string;
  distance: number;
  url: string;
  thumbnailUrl: string;
  thumbnailSrcset: string;
}

// Response bodies are read loosely: each test asserts the fields it needs.
async function call(
  base: string,
  method: string,
  route: string,
  payload?: unknown,
  headers: Record<string, string> = AUTH_HEADER,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<{ status: number; body: any }> {
  const init: RequestInit = { method, headers };
  if (payload instanceof FormData) init.body = payload;
  else if (typeof payload === 'string') Object.assign(init, { body: payload, headers: { ...headers, 'content-type': 'application/json' } });
  else if (payload !== undefined) Object.assign(init, { body: JSON.stringify(payload), headers: { ...headers, 'content-type': 'application/json' } });
  const response = await fetch(base + route, init);
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (HTML, images)
  }
  return { status: response.status, body };
}

/** A raw GET that keeps the path as written (fetch would normalise "..").*/
function rawGet(base: string, rawPath: string): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    http
      .get({ host: url.hostname, port: url.port, path: rawPath }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

function expectOrdered(results: Result[]) {
  for (const r of results) {
    expect(r).to.have.all.keys('id', 'path', 'distance', 'url', 'thumbnailUrl', 'thumbnailSrcset');
    expect(r.url).to.equal('/images/' + r.path.split('/').map(encodeURIComponent).join('/'));
    expect(r.thumbnailUrl).to.equal(`/api/images/${r.id}/thumbnail?size=160`);
    expect(r.thumbnailSrcset).to.equal(`${r.thumbnailUrl} 1x, /api/images/${r.id}/thumbnail?size=320 2x`);
  }
  for (let i = 1; i < results.length; i++) expect(results[i].distance).to.be.at.least(results[i - 1].distance);
}

async function waitForJob(base: string) {
  for (;;) {
    const { body } = await call(base, 'GET', '/api/index/status');
    if (body.job && body.job.state !== 'running') return body;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const JWT_SECRET = 'image-search-test-jwt-secret-0123456789';

describe('image-search: HTTP API', function () {
  this.timeout(120_000);
  let modelDir: string;
  let images: Awaited<ReturnType<typeof makeImageDir>>;
  let indexDir: string;
  let service: RunningService;
  let base: string;
  const options = (): StartImageSearchOptions =>
    testServiceOptions(
      { modelDir, images, indexDir },
      { IMAGE_SEARCH_BUFFER_THRESHOLD: 5, IMAGE_SEARCH_MAX_UPLOAD_BYTES: 300_000, STRATA_JWT_SECRET: JWT_SECRET },
    );

  before(async () => {
    modelDir = makeTestModel();
    images = await makeImageDir();
    indexDir = tempDir('image-search-index');
    service = await startImageSearch(options());
    base = service.url;
  });
  after(async () => {
    await service?.stop();
    for (const d of [modelDir, images.dir, indexDir]) rmSync(d, { recursive: true, force: true });
  });

  it('GET / serves the web UI and its assets; GET /api/status reports model and LLM state', async () => {
    const page = await call(base, 'GET', '/');
    expect(page.status).to.equal(200);
    expect(page.body).to.contain('Strata image search');
    expect((await call(base, 'GET', '/static/app.js')).status).to.equal(200);
    const status = await call(base, 'GET', '/api/status');
    expect(status.body.model.loaded).to.equal(true);
    // The test model is not CLIP, and the status says so.
    expect(status.body.model).to.deep.include({ backbone: 'strata-test-clip', testEncoder: true });
    expect(status.body.model.note).to.match(/^test encoder, not CLIP/);
    expect(status.body.llm).to.deep.include({ enabled: false });
    expect(status.body.features).to.deep.include({ textSearch: true, queryExpansion: false, chat: false });
    expect((await call(base, 'GET', '/readyz')).status).to.equal(200);
  });

  it('POST /api/index/add indexes images by path and refuses bad paths without touching the index', async () => {
    const all = [...Object.values(images.colourFiles).flat(), 'colours/red-photo.jpg', 'colours/blue-photo.webp'];
    const added = await call(base, 'POST', '/api/index/add', { image_paths: all });
    expect(added.status).to.equal(200);
    expect(added.body.added).to.have.length(all.length);
    expect(added.body.added[0]).to.include({ id: 0, path: all[0] });
    expect(added.body.buffer.mergeSuggested).to.equal(true);
    const again = await call(base, 'POST', '/api/index/add', { image_paths: [all[0]] });
    expect(again.body.skipped[0]).to.include({ id: 0, reason: 'already indexed' });

    const before = (await call(base, 'GET', '/api/index/status')).body.nextId;
    // A symlink inside the directory that points out of it counts as outside.
    const outside = tempDir('image-outside');
    writeFileSync(path.join(outside, 'secret.png'), await colourImage([1, 2, 3], 5));
    symlinkSync(path.join(outside, 'secret.png'), path.join(images.dir, 'colours', 'escape.png'));
    const escape = await call(base, 'POST', '/api/index/add', { image_paths: ['colours/escape.png'] });
    expect(escape.body.error.message).to.match(/outside the image directory/);
    expect(await rawGet(base, '/images/colours/escape.png')).to.equal(404);
    rmSync(path.join(images.dir, 'colours', 'escape.png'));
    rmSync(outside, { recursive: true, force: true });
    for (const bad of [['../../etc/passwd'], ['/etc/hostname'], ['colours/missing.png'], [all[1], 'broken.png'], [], 'x', [42], ['colours/escape.png']]) {
      const response = await call(base, 'POST', '/api/index/add', { image_paths: bad });
      expect(response.status, JSON.stringify(bad)).to.equal(400);
      expect(response.body.error.code).to.equal('bad_request');
    }
    expect((await call(base, 'POST', '/api/index/add', '{"image_paths": [')).status).to.equal(400);
    const huge = await call(base, 'POST', '/api/index/add', { image_paths: [`colours/${'x'.repeat(400_000)}.png`] });
    expect(huge.status).to.equal(413);
    expect(huge.body.error.code).to.equal('payload_too_large');
    expect((await call(base, 'POST', '/api/index/add', { paths: [all[0]] })).status).to.equal(400);
    expect((await call(base, 'GET', '/api/index/status')).body.nextId).to.equal(before);
  });

  it('POST /search finds images by text and by uploaded image, ordered by distance', async () => {
    const text = await call(base, 'POST', '/search', { query: 'red', topk: 3 });
    expect(text.status).to.equal(200);
    expect(text.body.results).to.have.length(3);
    expectOrdered(text.body.results);
    for (const r of text.body.results as Result[]) expect(r.path).to.match(/red/);
    const image = await fetch(base + (text.body.results as Result[])[0].url);
    expect(image.status).to.equal(200);
    expect(image.headers.get('content-type')).to.match(/^image\//);

    const form = new FormData();
    form.append('topk', '4');
    form.append('query_img', new Blob([new Uint8Array(await colourImage([35, 65, 215], 1234))], { type: 'image/png' }), 'query.png');
    const byImage = await call(base, 'POST', '/search', form);
    expect(byImage.status).to.equal(200);
    expect(byImage.body.results).to.have.length(4);
    expectOrdered(byImage.body.results);
    for (const r of byImage.body.results as Result[]) expect(r.path).to.match(/blue/);

    const defaults = await call(base, 'POST', '/search', { query: 'a picture' });
    expect(defaults.body.topk).to.equal(20);
  });

  it('POST /search rejects bad input with clear 4xx errors', async () => {
    for (const topk of [0, 101, 'many', 2.5]) {
      const r = await call(base, 'POST', '/search', { query: 'red', topk });
      expect(r.status).to.equal(400);
      expect(r.body.error.message).to.match(/topk must be an integer from 1 to 100/);
    }
    expect((await call(base, 'POST', '/search', { topk: 3 })).status).to.equal(400);
    expect((await call(base, 'POST', '/search', '{not json')).body.error).to.include({ code: 'bad_request' });
    const notImage = new FormData();
    notImage.append('query_img', new Blob(['hello, not an image']), 'notes.txt');
    const bad = await call(base, 'POST', '/search', notImage);
    expect(bad.status).to.equal(415);
    expect(bad.body.error.message).to.match(/not a decodable image/);
    const huge = new FormData();
    huge.append('query_img', new Blob([new Uint8Array(400_000).fill(1)]), 'huge.png');
    expect((await call(base, 'POST', '/search', huge)).status).to.equal(413);
    const empty = new FormData();
    empty.append('topk', '3');
    expect((await call(base, 'POST', '/search', empty)).status).to.equal(400);
  });

  it('every error answer has the shape of the other Strata APIs: {error: {code, message}}, nothing beside it', async () => {
    const answers = [
      await call(base, 'GET', '/api/no-such-endpoint'),
      await call(base, 'GET', '/images/nothing.png'),
      await call(base, 'POST', '/search', '{not json'),
      await call(base, 'POST', '/search', { query: 'red', topk: 0 }),
      await call(base, 'POST', '/api/index/remove', { image_ids: [9999] }),
    ];
    expect(answers.map((a) => a.status)).to.deep.equal([404, 404, 400, 400, 404]);
    expect(answers.map((a) => a.body.error.code)).to.deep.equal(['not_found', 'not_found', 'bad_request', 'bad_request', 'not_found']);
    for (const { body } of answers) {
      expect(Object.keys(body)).to.deep.equal(['error']);
      expect(body.error.message).to.be.a('string').and.not.equal('');
    }
  });

  it('serves images only from the image directory', async () => {
    expect(await rawGet(base, '/images/colours/red-0.png')).to.equal(200);
    expect(await rawGet(base, '/images/../../../etc/passwd')).to.be.within(400, 404);
    expect(await rawGet(base, '/images/%2e%2e/%2e%2e/%2e%2e/etc/passwd')).to.be.within(400, 404);
    expect(await rawGet(base, '/images/nothing.png')).to.equal(404);
  });

  it('POST /api/index/remove hides images at once; unknown ids are a 404 and change nothing', async () => {
    const [target] = (await call(base, 'POST', '/search', { query: 'red', topk: 1 })).body.results as Result[];
    const unknown = await call(base, 'POST', '/api/index/remove', { image_ids: [target.id, 9999] });
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error.unknownIds).to.deep.equal([9999]);
    expect((await call(base, 'POST', '/api/index/remove', { image_ids: ['1'] })).status).to.equal(400);
    expect(((await call(base, 'POST', '/search', { query: 'red', topk: 1 })).body.results as Result[])[0].id).to.equal(target.id);
    const removed = await call(base, 'POST', '/api/index/remove', { image_ids: [target.id] });
    expect(removed.body.removed).to.deep.equal([target.id]);
    const after = (await call(base, 'POST', '/search', { query: 'red', topk: 20 })).body.results as Result[];
    expect(after.map((r) => r.id)).to.not.include(target.id);
    expect((await call(base, 'GET', '/api/index/status')).body.deleted).to.equal(1);
  });

  it('POST /api/index/merge and /api/index/rebuild run in the background; search keeps working', async () => {
    const merge = await call(base, 'POST', '/api/index/merge');
    expect(merge.status).to.equal(202);
    expect(merge.body.job).to.include({ op: 'merge' });
    let status = await waitForJob(base);
    expect(status.job.state).to.equal('done');
    expect(status.main.kind).to.equal('exact');
    expect(status.buffer.vectors).to.equal(0);
    expect(status.training.message).to.match(/needs at least 159744 vectors/);
    expect((await call(base, 'POST', '/search', { query: 'blue', topk: 2 })).body.results).to.have.length(2);
    // Merging an empty buffer is a no-op (no new index generation).
    await call(base, 'POST', '/api/index/merge');
    const noop = await waitForJob(base);
    expect(noop.job.result).to.include({ moved: 0, note: 'buffer empty: nothing to merge' });
    expect(noop.main.generation).to.equal(status.main.generation);

    const rebuild = await call(base, 'POST', '/api/index/rebuild');
    expect(rebuild.status).to.equal(202);
    status = await waitForJob(base);
    expect(status.job).to.include({ op: 'rebuild', state: 'done' });
    expect(status.deleted).to.equal(0);
    expect(status.main.vectors).to.equal(status.totalVectors);
  });

  it('GET /api/tools lists 4 function tools; POST /api/tools/call runs them', async () => {
    const tools = await call(base, 'GET', '/api/tools');
    expect(tools.body.tools.map((t: { function: { name: string } }) => t.function.name)).to.deep.equal([
      'search_by_text',
      'search_by_image_id',
      'get_index_status',
      'add_images',
    ]);
    for (const t of tools.body.tools) expect(t).to.have.nested.property('function.parameters.type', 'object');
    const search = await call(base, 'POST', '/api/tools/call', { tool: 'search_by_text', arguments: { query: 'green', topk: 2 } });
    expect(search.status).to.equal(200);
    expect(search.body.result.results).to.have.length(2);
    const similar = await call(base, 'POST', '/api/tools/call', {
      tool: 'search_by_image_id',
      arguments: { image_id: search.body.result.results[0].id, topk: 2 },
    });
    expect(similar.body.result.results.map((r: Result) => r.id)).to.not.include(search.body.result.results[0].id);
    const status = await call(base, 'POST', '/api/tools/call', { tool: 'get_index_status', arguments: {} });
    expect(status.body.result).to.have.property('totalVectors');
    const tux = firstStamp(images.dir);
    if (tux) {
      const add = await call(base, 'POST', '/api/tools/call', { tool: 'add_images', arguments: { image_paths: [tux] } });
      expect(add.body.result.added).to.have.length(1);
    }
    expect((await call(base, 'POST', '/api/tools/call', { tool: 'rm_rf', arguments: {} })).status).to.equal(404);
    expect((await call(base, 'POST', '/api/tools/call', { tool: 'search_by_text', arguments: { topk: 2 } })).status).to.equal(400);
    expect((await call(base, 'POST', '/api/tools/call', { tool: 'search_by_image_id', arguments: { image_id: 424242 } })).status).to.equal(404);
    expect((await call(base, 'POST', '/api/tools/call', { tool: 'search_by_text', arguments: [1] })).status).to.equal(400);
    expect((await call(base, 'POST', '/api/tools/call', { tool: 'search_by_text', arguments: { query: 'red', topk: 1000 } })).status).to.equal(400);
    expect((await call(base, 'POST', '/api/tools/call', { arguments: {} })).status).to.equal(400);
    const outside = await call(base, 'POST', '/api/tools/call', { tool: 'add_images', arguments: { image_paths: ['../x.png'] } });
    expect(outside.status).to.equal(400);
    expect(outside.body.error.message).to.match(/outside the image directory/);
  });

  it('LLM endpoints report themselves disabled; RAG falls back to plain retrieval', async () => {
    const rag = await call(base, 'POST', '/api/search/rag', { query: 'red', topk: 2, use_expansion: true });
    expect(rag.status).to.equal(200);
    expect(rag.body).to.include({ original_query: 'red', total_results: 2, llmEnabled: false });
    expect(rag.body.expanded_queries).to.deep.equal(['red']);
    // No explanation: null with a note, the same shape as a failed LLM.
    expect(rag.body.ai_explanation).to.equal(null);
    expect(rag.body.note).to.match(/^LLM assistance is disabled \(LLM_BASE_URL is not set\)/);
    expect((await call(base, 'POST', '/api/search/rag', { query: 'red', topk: 0 })).status).to.equal(400);
    expect((await call(base, 'POST', '/api/search/rag', { query: 'red', use_expansion: 'yes' })).status).to.equal(400);
    expect((await call(base, 'POST', '/api/search/rag', '{"query":')).status).to.equal(400);
    expectOrdered(rag.body.results);
    for (const [route, payload] of [
      ['/api/search/expand', { query: 'red' }],
      ['/api/rag/qa', { question: 'which images are red?' }],
      ['/api/chat', { message: 'hello' }],
    ] as const) {
      const r = await call(base, 'POST', route, payload);
      expect(r.status, route).to.equal(503);
      expect(r.body.error.code).to.equal('llm_disabled');
      expect(r.body.error.message).to.match(/LLM_BASE_URL/);
    }
  });

  it("keeps the specification's field names and spells every field Strata adds in camelCase", async () => {
    const rag = (await call(base, 'POST', '/api/search/rag', { query: 'red', topk: 2, use_expansion: false })).body;
    expect(rag).to.have.all.keys(
      'original_query',
      'expanded_queries',
      'results',
      'ai_explanation',
      'note',
      'total_results',
      'llmEnabled',
      'bestSimilarity',
      'weakMatch',
    );
    expect((await call(base, 'POST', '/search', { query: 'red', topk: 1 })).body).to.have.all.keys(
      'query',
      'topk',
      'results',
      'total_results',
      'bestSimilarity',
      'weakMatch',
    );
    const tools = (await call(base, 'GET', '/api/tools')).body;
    expect(tools.writeTools).to.deep.equal(['add_images']);
    const [byText, byId, , add] = tools.tools as Array<{ function: { parameters: { properties: object } } }>;
    expect(byText.function.parameters.properties).to.have.all.keys('query', 'topk');
    expect(byId.function.parameters.properties).to.have.all.keys('image_id', 'topk');
    expect(add.function.parameters.properties).to.have.all.keys('image_paths');
    const bodies = [
      rag,
      tools,
      (await call(base, 'POST', '/api/index/add', { image_paths: [images.colourFiles.red[0]] })).body,
      (await call(base, 'POST', '/api/index/merge')).body,
      await waitForJob(base),
      (await call(base, 'GET', '/api/status')).body,
      (await call(base, 'POST', '/api/index/remove', { image_ids: [424242] })).body,
      (await call(base, 'POST', '/api/tools/call', { tool: 'get_index_status', arguments: {} })).body,
    ];
    for (const key of bodies.flatMap((b) => keysOf(b))) expect(SPEC_FIELDS.has(key) || /^[a-z][a-zA-Z0-9]*$/.test(key), key).to.equal(true);
  });

  it('keeps its state across a restart', async () => {
    const before = await call(base, 'POST', '/search', { query: 'yellow', topk: 5 });
    const statusBefore = (await call(base, 'GET', '/api/index/status')).body;
    await service.stop();
    service = await startImageSearch(options());
    base = service.url;
    const statusAfter = (await call(base, 'GET', '/api/index/status')).body;
    expect(statusAfter.nextId).to.equal(statusBefore.nextId);
    expect(statusAfter.main).to.deep.equal(statusBefore.main);
    expect((await call(base, 'POST', '/search', { query: 'yellow', topk: 5 })).body).to.deep.equal(before.body);
  });

  it('starts without a model and says so clearly', async () => {
    const noModelIndex = tempDir('no-model-index');
    const noModel = await startImageSearch({ ...options(), IMAGE_SEARCH_MODEL_DIR: undefined, IMAGE_SEARCH_INDEX_DIR: noModelIndex });
    try {
      const ready = await call(noModel.url, 'GET', '/readyz');
      expect(ready.status).to.equal(503);
      expect(ready.body.checks['clip-model']).to.match(/CLIP model missing/);
      const status = await call(noModel.url, 'GET', '/api/status');
      expect(status.body.model).to.include({ loaded: false });
      expect(status.body.model.error).to.match(/IMAGE_SEARCH_MODEL_DIR/);
      const search = await call(noModel.url, 'POST', '/search', { query: 'red' });
      expect(search.status).to.equal(503);
      expect(search.body.error.code).to.equal('model_missing');
      expect((await call(noModel.url, 'GET', '/api/index/status')).status).to.equal(200);
    } finally {
      await noModel.stop();
      rmSync(noModelIndex, { recursive: true, force: true });
    }
  });
});

/** Fields the image retrieval specification names: they keep its snake_case spelling. */
const SPEC_FIELDS = new Set([
  'original_query',
  'expanded_queries',
  'ai_explanation',
  'total_results',
  'use_expansion',
  'query_img',
  'image_paths',
  'image_ids',
  // The search_by_image_id tool's argument: one image of the specification's image_ids.
  'image_id',
]);

/** Every key of a JSON value, nested ones included. */
function keysOf(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(keysOf);
  if (!value || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, v]) => [key, ...keysOf(v)]);
}

function firstStamp(dir: string): string | undefined {
  const stamps = path.join(dir, 'tuxpaint');
  return existsSync(stamps)
    ? readdirSync(stamps)
        .filter((f) => f.endsWith('.png'))
        .map((f) => `tuxpaint/${f}`)[0]
    : undefined;
}
