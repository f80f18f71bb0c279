import { expect } from 'chai';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { startFakeLlm } from './support/fake-llm.js';
import { colourImage, startTestImageSearch, tempDir, TEST_API_KEY, testServiceOptions, type TestImageSearch, waitForVectors } from './support/fixtures.js';

describe('image-search: web UI in Chromium', function () {
  this.timeout(120_000);
  let fixture: TestImageSearch;
  let browser: BrowserContext;
  const dirs: string[] = [];

  before(async () => {
    fixture = await startTestImageSearch('image-search-ui', { IMAGE_SEARCH_BUFFER_THRESHOLD: 10, IMAGE_SEARCH_SCAN_ON_START: true });
    const profile = tempDir('chromium-profile');
    dirs.push(profile);
    browser = await launchChromium(profile, { viewport: { width: 1280, height: 900 } });
    await waitForVectors(fixture.service.url, 14);
  });
  after(async () => {
    await browser?.close();
    await fixture?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('searches by text and by image, shows distances and index status, and runs a merge', async () => {
    const { service } = fixture;
    const page = await browser.newPage();
    const offline: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(service.url)) offline.push(r.url());
    });
    await page.goto(service.url + '/');
    await page.waitForSelector('#model-state.warn');
    expect(await page.textContent('#model-state')).to.equal('test encoder (not CLIP)');
    expect(await page.textContent('#llm-state')).to.equal('LLM disabled');
    expect(await page.isDisabled('#use-ai')).to.equal(true);
    await page.waitForFunction(() => document.querySelector('#index-status')?.textContent?.includes('merge suggested'));

    await page.fill('#query', 'green');
    await page.fill('#topk', '3');
    await page.click('#text-form button');
    await page.waitForSelector('#results .card');
    const cards = await page.$$eval('#results .card', (els) => els.map((e) => e.textContent ?? ''));
    expect(cards).to.have.length(3);
    for (const c of cards) expect(c).to.match(/distance \d+\.\d{4}.*green/);
    // The grid loads thumbnails, not the originals.
    await page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('#results img')].every((i) => i.complete && i.naturalWidth > 0));
    const sources = await page.$$eval('#results img', (imgs) => imgs.map((i) => (i as HTMLImageElement).currentSrc));
    for (const src of sources) expect(src).to.match(/\/api\/images\/\d+\/thumbnail\?size=160$/);

    const queryFile = path.join(fixture.indexDir, 'query-yellow.png');
    mkdirSync(path.dirname(queryFile), { recursive: true });
    writeFileSync(queryFile, await colourImage([235, 215, 45], 777));
    await page.setInputFiles('#query-img', queryFile);
    await page.click('#image-form button');
    await page.waitForFunction(() => document.querySelector('#message')?.textContent?.includes('similar to query-yellow.png'));
    const first = await page.textContent('#results .card');
    expect(first).to.match(/yellow/);

    // Add form: without a token the change is refused, saying how to give one.
    await page.fill('#add-paths', 'colours/red-0.png');
    await page.click('#add-form button');
    await page.waitForSelector('#message.error');
    expect(await page.textContent('#message')).to.match(/needs a token.*Access token/);
    await page.fill('#token', TEST_API_KEY);
    await page.dispatchEvent('#token', 'change');
    // Then a new file is added; a path outside the image directory is refused with the reason.
    writeFileSync(path.join(fixture.images.dir, 'colours', 'late-green.png'), await colourImage([45, 165, 65], 4242));
    await page.fill('#add-paths', 'colours/late-green.png');
    await page.click('#add-form button');
    await page.waitForFunction(() => document.querySelector('#message')?.textContent === 'added 1, skipped 0');
    await page.fill('#add-paths', '../../etc/passwd');
    await page.click('#add-form button');
    await page.waitForSelector('#message.error');
    expect(await page.textContent('#message')).to.match(/outside the image directory/);

    await page.click('#merge');
    await page.waitForFunction(() => document.querySelector('#index-status')?.textContent?.includes('merge: done'), undefined, { timeout: 30_000 });
    expect(await page.textContent('#index-status')).to.match(/exact \(\d+\)/);

    await page.fill('#query', 'red');
    await page.fill('#topk', '12');
    await page.click('#text-form button');
    await page.waitForFunction(() => document.querySelectorAll('#results .card').length === 12);
    await page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('#results img')].every((i) => i.complete));
    mkdirSync('test/artifacts', { recursive: true });
    await page.screenshot({ path: 'test/artifacts/image-search-ui.png', fullPage: true });
    expect(offline, 'the UI must not fetch anything from outside').to.deep.equal([]);
    await page.close();
  });

  it('with an LLM configured: AI assist expands the query and shows the explanation', async () => {
    const llm = await startFakeLlm('ui-key');
    const indexDir = tempDir('image-search-ui-llm');
    dirs.push(indexDir);
    const assisted = await startImageSearch(
      testServiceOptions(
        { ...fixture, indexDir },
        { IMAGE_SEARCH_SCAN_ON_START: true, LLM_BASE_URL: llm.url, LLM_API_KEY: 'ui-key', LLM_MODEL: 'strata-test-model' },
      ),
    );
    const page = await browser.newPage();
    try {
      await page.goto(assisted.url + '/');
      await page.waitForFunction(() => document.querySelector('#llm-state')?.textContent === 'LLM: strata-test-model');
      await page.waitForFunction(() => !(document.querySelector('#use-ai') as HTMLInputElement).disabled);
      await page.waitForFunction(() => Number(document.querySelector('#index-status dd')?.textContent) >= 14);
      await page.check('#use-ai');
      await page.fill('#query', 'red');
      await page.fill('#topk', '4');
      await page.click('#text-form button');
      await page.waitForSelector('#explanation:not([hidden])');
      expect(await page.textContent('#explanation')).to.equal('These images are mostly red. (queries: red | crimson things | scarlet objects | red pictures)');
      const cards = await page.$$eval('#results .card', (els) => els.map((e) => e.textContent ?? ''));
      expect(cards).to.have.length(4);
      expect(cards[0]).to.match(/red/);
    } finally {
      await page.close();
      await assisted.stop();
      await llm.close();
    }
  });

  it('an AI-assisted search waiting on a hanging LLM can be cancelled, and the next search works', async () => {
    const sockets = new Set<Socket>();
    // Accepts every request and never answers.
    const hanging = http.createServer(() => undefined);
    hanging.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    const indexDir = tempDir('image-search-ui-hanging');
    dirs.push(indexDir);
    const assisted = await startImageSearch(
      testServiceOptions(
        { ...fixture, indexDir },
        {
          IMAGE_SEARCH_SCAN_ON_START: true,
          LLM_BASE_URL: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/v1`,
          LLM_MODEL: 'strata-test-model',
          LLM_TIMEOUT_SECONDS: 600,
        },
      ),
    );
    const page = await browser.newPage();
    try {
      await page.goto(assisted.url + '/');
      await page.waitForFunction(() => !(document.querySelector('#use-ai') as HTMLInputElement).disabled);
      await page.waitForFunction(() => Number(document.querySelector('#index-status dd')?.textContent) >= 14);
      expect(await page.isHidden('#cancel-search')).to.equal(true);
      await page.check('#use-ai');
      await page.fill('#query', 'red');
      await page.click('#text-form button[type=submit]');
      await page.waitForSelector('#cancel-search:not([hidden])');
      expect(await page.textContent('#message')).to.equal('searching…');
      await page.click('#cancel-search');
      await page.waitForFunction(() => document.querySelector('#message')?.textContent === 'search cancelled');
      expect(await page.isHidden('#cancel-search')).to.equal(true);
      await page.uncheck('#use-ai');
      await page.click('#text-form button[type=submit]');
      await page.waitForFunction(() => document.querySelector('#message')?.textContent?.endsWith('results for “red”'));
    } finally {
      await page.close();
      await assisted.stop();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => hanging.close(resolve));
    }
  });
});
