import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { ClipEncoder } from '../../images/image-search/src/clip/encoder.js';
import { loadImageSearchConfig } from '../../images/image-search/src/config.js';
import { ConfigError } from '../../images/service-kit/src/index.js';
import { AUTH_HEADER, makeImageDir, makeTestModel, tempDir, TEST_API_KEY } from './support/fixtures.js';

describe('image-search: configuration from the environment', function () {
  this.timeout(60_000);

  it('has the defaults of the spec', () => {
    const config = loadImageSearchConfig({});
    expect(config).to.deep.include({
      PORT: 8080,
      IMAGE_FILE_DIR: 'train2017/',
      IMAGE_SEARCH_INDEX_STRING: 'IVF4096,PQ32x8',
      IMAGE_SEARCH_TOPK: 20,
      IMAGE_SEARCH_MAX_TOPK: 100,
      IMAGE_SEARCH_BUFFER_THRESHOLD: 1000,
      IMAGE_SEARCH_RERANK: true,
      IMAGE_SEARCH_RERANK_FACTOR: 10,
      // Slow clients: a body silent 20 s is refused, an answer unread for 30 s is cut.
      IMAGE_SEARCH_BODY_IDLE_TIMEOUT_MS: 20_000,
      IMAGE_SEARCH_READER_IDLE_TIMEOUT_MS: 30_000,
    });
    expect(config.IMAGE_SEARCH_MODEL_DIR).to.equal(undefined);
    // With a bucket source and no IMAGE_FILE_DIR, the mirror goes where the (writable) index state is.
    const bucket = loadImageSearchConfig({ IMAGE_SEARCH_SOURCE_S3_URL: 's3://photos/cams', IMAGE_SEARCH_INDEX_DIR: '/state' });
    expect(bucket.IMAGE_FILE_DIR).to.equal(path.join('/state', 'source-images'));
    expect(loadImageSearchConfig({ IMAGE_SEARCH_SOURCE_S3_URL: 's3://photos/cams', IMAGE_FILE_DIR: '/pics' }).IMAGE_FILE_DIR).to.equal('/pics');
    expect(config.LLM_BASE_URL).to.equal(undefined);
    // Unset: the first model the upstream lists (looked up by the service).
    expect(config.LLM_MODEL).to.equal(undefined);
  });

  it('reports every bad value at once', () => {
    let error: unknown;
    try {
      loadImageSearchConfig({
        IMAGE_SEARCH_TOPK: '0',
        IMAGE_SEARCH_BUFFER_THRESHOLD: 'lots',
        IMAGE_SEARCH_MAX_TOPK: '100000',
        IMAGE_SEARCH_EXECUTION_PROVIDER: 'tpu',
        IMAGE_SEARCH_RERANK_FACTOR: '0',
        IMAGE_SEARCH_TRAIN_NITER: 'ten',
        IMAGE_SEARCH_TRAIN_TWO_LEVEL: 'maybe',
      });
    } catch (err) {
      error = err;
    }
    expect(error).to.be.instanceOf(ConfigError);
    expect((error as ConfigError).problems).to.have.length(7);
  });

  it('takes IMAGE_FILE_DIR and IMAGE_SEARCH_MODEL_DIR (and the rest) from the environment', async () => {
    const modelDir = makeTestModel();
    const images = await makeImageDir();
    const indexDir = tempDir('image-search-env');
    const service = await startImageSearch({
      env: {
        PORT: '0',
        IMAGE_FILE_DIR: images.dir,
        IMAGE_SEARCH_MODEL_DIR: modelDir,
        IMAGE_SEARCH_INDEX_DIR: indexDir,
        IMAGE_SEARCH_TOPK: '7',
        IMAGE_SEARCH_BUFFER_THRESHOLD: '2',
        // No CUDA libraries on this machine: the encoders fall back to the CPU and say so.
        IMAGE_SEARCH_EXECUTION_PROVIDER: 'cuda',
        IMAGE_SEARCH_API_KEY: TEST_API_KEY,
      },
      host: '127.0.0.1',
      logger: pino({ level: 'silent' }),
    });
    try {
      // Server paths are told to admins only.
      const status = (await (await fetch(`${service.url}/api/status`, { headers: AUTH_HEADER })).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(status.imageDir).to.equal(path.resolve(images.dir));
      expect(status.model).to.include({ loaded: true, dir: modelDir, executionProvider: 'cpu' });
      expect(status.model.executionProviderNote).to.match(/CUDA execution provider unavailable/);
      expect(status.defaults).to.include({ topk: 7, indexString: 'IVF4096,PQ32x8' });
      const added = await fetch(`${service.url}/api/index/add`, {
        method: 'POST',
        headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
        body: JSON.stringify({ image_paths: images.colourFiles.red }),
      });
      const body = (await added.json()) as { buffer: { mergeSuggested: boolean; threshold: number } };
      expect(body.buffer).to.include({ threshold: 2, mergeSuggested: true });
      const search = (await (
        await fetch(`${service.url}/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"red"}' })
      ).json()) as { topk: number; results: unknown[] };
      expect(search.topk).to.equal(7);
      expect(search.results).to.have.length(3);
    } finally {
      await service.stop();
      for (const d of [modelDir, images.dir, indexDir]) rmSync(d, { recursive: true, force: true });
    }
  });
});

describe('image-search: npm run make-test-clip -- <dir>', function () {
  this.timeout(60_000);

  it('writes a loadable CLIP-shaped model (512-d, pixel_values / input_ids) into <dir>', async () => {
    const dir = path.join(tempDir('make-test-clip'), 'nested', 'model');
    try {
      // What the npm script runs.
      const run = spawnSync(process.execPath, ['--import', 'tsx', 'hack/clip/make-test-clip.ts', dir], { encoding: 'utf8' });
      expect(run.status, run.stderr).to.equal(0);
      expect(readdirSync(dir)).to.include.members(['image_encoder.onnx', 'text_encoder.onnx', 'merges.txt', 'vocab.json']);
      const encoder = await ClipEncoder.load(dir);
      expect(encoder.dim).to.equal(512);
      const v = await encoder.encodeTexts(['a red flower']);
      expect(v).to.have.length(512);
      await encoder.close();
      const usage = spawnSync(process.execPath, ['--import', 'tsx', 'hack/clip/make-test-clip.ts'], { encoding: 'utf8' });
      expect(usage.status).to.equal(2);
      expect(usage.stderr).to.match(/usage: npm run make-test-clip -- <dir>/);
    } finally {
      rmSync(path.dirname(path.dirname(dir)), { recursive: true, force: true });
    }
  });
});
