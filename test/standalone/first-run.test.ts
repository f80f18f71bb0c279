import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { loadImageSearchConfig } from '../../images/image-search/src/config.js';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { logFormat } from '../../images/service-kit/src/logger.js';
import { renderBanner } from '../../images/standalone/src/banner.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';
import { DEMO_IMAGES, prepareImageSearchDemo } from '../../images/standalone/src/image-search-demo.js';

describe('standalone: first-run defaults', function () {
  this.timeout(120_000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-first-run-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("the README's first screen (40 lines) shows how to try it and how to test it", () => {
    const readme = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../README.md');
    const top = readFileSync(readme, 'utf8').split('\n').slice(0, 40).join('\n');
    expect(top).to.match(/^## Try it\b/m);
    expect(top).to.match(/^npm start$/m);
    expect(top).to.match(/^## Tests$/m);
    expect(top).to.match(/^npm test\b/m);
  });

  it('npm start listens on 127.0.0.1 unless STRATA_HOST says otherwise', () => {
    expect(loadStandaloneEnv({}).STRATA_HOST).to.equal('127.0.0.1');
    expect(loadStandaloneEnv({ STRATA_HOST: '0.0.0.0' }).STRATA_HOST).to.equal('0.0.0.0');
  });

  it('the image search image has a host setting of its own', async () => {
    expect(loadImageSearchConfig({}).IMAGE_SEARCH_HOST).to.equal('0.0.0.0');
    const service = await startImageSearch({
      env: { IMAGE_SEARCH_HOST: '127.0.0.1', PORT: '0', IMAGE_SEARCH_INDEX_DIR: path.join(dir, 'index'), IMAGE_FILE_DIR: dir },
      logger: pino({ level: 'silent' }),
    });
    try {
      expect(service.url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    } finally {
      await service.stop();
    }
  });

  it('logs are readable lines in a terminal and JSON otherwise, unless LOG_FORMAT says', () => {
    expect(logFormat({}, true)).to.equal('pretty');
    expect(logFormat({}, false)).to.equal('json');
    expect(logFormat({ LOG_FORMAT: 'json' }, true)).to.equal('json');
    expect(logFormat({ LOG_FORMAT: 'pretty' }, false)).to.equal('pretty');
  });

  it('image search gets the test encoder and demo images once, and never beside the user’s own', async () => {
    const first = await prepareImageSearchDemo(dir, {});
    expect(first).to.deep.include({ testEncoder: true, imagesWritten: Object.keys(DEMO_IMAGES).length });
    expect(first.env).to.deep.include({
      IMAGE_SEARCH_MODEL_DIR: path.join(dir, 'test-model'),
      IMAGE_FILE_DIR: path.join(dir, 'images'),
      IMAGE_SEARCH_SCAN_ON_START: 'true',
    });
    expect(readdirSync(path.join(dir, 'test-model'))).to.include.members(['image_encoder.onnx', 'text_encoder.onnx', 'merges.txt']);
    expect(readdirSync(path.join(dir, 'images')).sort()).to.deep.equal(Object.keys(DEMO_IMAGES).sort());

    // A second start writes nothing; demo images the user deleted stay deleted.
    for (const f of readdirSync(path.join(dir, 'images'))) unlinkSync(path.join(dir, 'images', f));
    expect((await prepareImageSearchDemo(dir, {})).imagesWritten).to.equal(0);
    expect(readdirSync(path.join(dir, 'images'))).to.have.length(0);

    // A model of the user's own in data/image-search/model replaces the test encoder.
    mkdirSync(path.join(dir, 'model'));
    for (const f of ['image_encoder.onnx', 'text_encoder.onnx', 'merges.txt']) writeFileSync(path.join(dir, 'model', f), '');
    const own = await prepareImageSearchDemo(dir, {});
    expect(own).to.deep.include({ testEncoder: false });
    expect(own.env.IMAGE_SEARCH_MODEL_DIR).to.equal(path.join(dir, 'model'));

    // Directories of the user's own: nothing is written, nothing is overridden.
    const other = path.join(dir, 'other');
    const given = await prepareImageSearchDemo(other, { IMAGE_FILE_DIR: '/srv/photos', IMAGE_SEARCH_MODEL_DIR: '/srv/clip' });
    expect(given).to.deep.equal({ env: {}, testEncoder: false, imagesWritten: 0 });
    expect(existsSync(other)).to.equal(false);
  });

  it('the banner hides a password set by the user and names what image search runs', () => {
    const banner = renderBanner({
      gatewayUrl: 'http://127.0.0.1:9000',
      s3Domains: ['localhost'],
      rootUser: 'admin',
      rootPassword: 'a-secret-of-my-own',
      defaultPassword: false,
      dataDir: '/data',
      urls: { gateway: 'http://127.0.0.1:9000', 'image-search': 'http://127.0.0.1:8080' },
      notes: { 'image-search': ['demo test encoder', 'exact in-process index'] },
    });
    expect(banner).to.not.contain('a-secret-of-my-own');
    expect(banner).to.contain('AWS_ACCESS_KEY_ID=admin AWS_SECRET_ACCESS_KEY="$STRATA_ROOT_PASSWORD"');
    expect(banner).to.match(/image search\s+http:\/\/127\.0\.0\.1:8080\s+demo test encoder\n\s+exact in-process index/);
    // No poem app running: no line to open it.
    expect(banner).to.not.contain('poem');
  });
});
