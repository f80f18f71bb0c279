import { expect } from 'chai';
import { mkdirSync, rmSync } from 'node:fs';
import type { BrowserContext } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { layoutProblems } from '../support/page-layout.js';
import { startTestImageSearch, tempDir, TEST_API_KEY, type TestImageSearch, waitForVectors } from './support/fixtures.js';

describe('image-search: the page works at desktop and phone sizes (Chromium)', function () {
  this.timeout(120_000);
  let fixture: TestImageSearch;
  let service: RunningService;
  let browser: BrowserContext;
  let profile: string;

  before(async () => {
    fixture = await startTestImageSearch('image-search-layout', { IMAGE_SEARCH_SCAN_ON_START: true });
    service = fixture.service;
    profile = tempDir('chromium-profile');
    browser = await launchChromium(profile);
    await waitForVectors(service.url, 14);
    mkdirSync('test/artifacts', { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await fixture?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('answers /favicon.ico with an icon', async () => {
    const icon = await fetch(`${service.url}/favicon.ico`);
    expect(icon.status).to.equal(200);
    expect(icon.headers.get('content-type')).to.match(/icon/);
  });

  for (const [width, height] of [
    [1366, 900],
    [390, 844],
    [360, 740],
  ] as const) {
    it(`at ${width}×${height}: labelled inputs, no overflow, every control clickable, results open by keyboard with "more like this" and remove`, async () => {
      const page = await browser.newPage();
      await page.setViewportSize({ width, height });
      try {
        await page.goto(service.url + '/');
        await page.waitForSelector('#model-state.warn');
        // Every input has a label (visible text or aria-label).
        const unlabelled = await page.$$eval('input, textarea', (els) =>
          els.filter((e) => !(e as HTMLInputElement).labels?.length && !e.getAttribute('aria-label')).map((e) => e.id),
        );
        expect(unlabelled).to.deep.equal([]);
        expect(await page.getAttribute('link[rel=icon]', 'href')).to.equal('/favicon.ico');

        await page.fill('#query', 'red');
        await page.fill('#topk', '8');
        await page.press('#query', 'Enter');
        await page.waitForFunction(() => document.querySelectorAll('#results .card').length === 8);
        await page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('#results img')].every((i) => i.complete));
        expect(await layoutProblems(page, 'body')).to.deep.equal([]);
        await page.screenshot({ path: `test/artifacts/image-search-${width}x${height}.png`, fullPage: true });

        // Keyboard only: Tab reaches the first result, Enter opens its detail view.
        await page.focus('#topk');
        let focused = '';
        for (let i = 0; i < 12 && !focused.includes('card'); i++) {
          await page.keyboard.press('Tab');
          focused = await page.evaluate(() => document.activeElement?.className ?? '');
        }
        expect(focused).to.equal('card');
        const openedId = await page.evaluate(() => (document.activeElement as HTMLElement).dataset.id);
        await page.keyboard.press('Enter');
        await page.waitForSelector('#detail[open]');
        expect(await page.textContent('#detail-meta')).to.contain(`id ${openedId}`);
        expect(await layoutProblems(page, '#detail')).to.deep.equal([]);
        await page.screenshot({ path: `test/artifacts/image-search-${width}x${height}-detail.png` });

        await page.click('#more-like-this');
        await page.waitForFunction(() => document.querySelector('#message')?.textContent?.includes('images like'));
        const similar = await page.$$eval('#results .card', (els) => els.map((e) => (e as HTMLElement).dataset.id));
        expect(similar).to.not.include(openedId);
        expect(similar.length).to.be.greaterThan(0);

        // Remove: refused without a token, done with one.
        await page.click('#results .card');
        await page.waitForSelector('#detail[open]');
        const removedId = await page.evaluate(() => document.querySelector<HTMLElement>('#results .card')!.dataset.id!);
        await page.click('#remove-image');
        await page.waitForSelector('#message.error');
        expect(await page.textContent('#message')).to.match(/needs a token/);
        await page.fill('#token', TEST_API_KEY);
        await page.dispatchEvent('#token', 'change');
        await page.click(`#results .card[data-id="${removedId}"]`);
        await page.click('#remove-image');
        await page.waitForFunction(() => document.querySelector('#message')?.textContent?.startsWith('removed '));
        expect(await page.$(`#results .card[data-id="${removedId}"]`)).to.equal(null);
        const after = await (
          await fetch(`${service.url}/api/tools/call`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ tool: 'search_by_image_id', arguments: { image_id: Number(removedId) } }),
          })
        ).status;
        expect(after).to.equal(404);
      } finally {
        await page.close();
      }
    });
  }
});
