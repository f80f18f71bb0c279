import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { layoutProblems } from '../support/page-layout.js';
import { lineCountOf, shapePoem } from '../../images/poem-app/src/poem-shape.js';
import { poemTypeByCode } from '../../images/poem-app/src/poem-types.js';
import { linesAsked, startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.js';
import { startTestPoemApp, tempDir } from './support/poem-app-harness.js';

const ARTIFACTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../artifacts');

/** The fake model writes the lines it is asked for, the first quoting the theme, so the page shows real lines. */
const verse = (n: number, theme: string) => (n === 1 ? `Above the ${theme}, the evening leans,` : `and bell ${n} counts the harbour in,`);
const writePoem = linesAsked(verse);

/** The poem the page shows for a form and theme: the fake's lines in the form's shape. */
function expectedPoem(code: string, theme: string): string {
  const type = poemTypeByCode(code)!;
  return shapePoem(
    Array.from({ length: lineCountOf(type, theme) }, (_, i) => verse(i + 1, theme)),
    type,
    theme,
  );
}

/** Parts of a history card (type badge, date, theme, preview) that reach past the card's edges. */
async function spillsOutOfHistoryCards(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const problems: string[] = [];
    for (const card of document.querySelectorAll<HTMLElement>('.history__item')) {
      const edge = card.getBoundingClientRect();
      for (const part of card.querySelectorAll<HTMLElement>('.badge, .history__date, .history__theme, .history__preview')) {
        const box = part.getBoundingClientRect();
        if (box.right > edge.right + 0.5 || box.left < edge.left - 0.5) {
          problems.push(
            `${part.className} "${part.textContent}" spans ${Math.round(box.left)}..${Math.round(box.right)}, its card ${Math.round(edge.left)}..${Math.round(edge.right)}`,
          );
        }
      }
    }
    return problems;
  });
}

describe('poem-app page in Chromium', function () {
  let tmp: ReturnType<typeof tempDir>;
  let profile: string;
  let upstream: FakeOpenAI;
  let app: RunningService;
  let context: BrowserContext;
  let page: Page;

  before(async () => {
    tmp = tempDir('poem-browser');
    profile = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-poem-chromium-'));
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    upstream = await startFakeOpenAI({
      kind: 'poem',
      content: writePoem,
    });
    // A short upstream timeout lets the loading-then-timeout case finish quickly.
    app = await startTestPoemApp(path.join(tmp.dir, 'poems.db'), upstream.baseUrl, { timeoutMs: 1500 });
    context = await launchChromium(profile, {
      acceptDownloads: true,
      viewport: { width: 1280, height: 900 },
      colorScheme: 'light',
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(15_000);
  });

  after(async () => {
    await context?.close();
    await app?.stop();
    await upstream?.close();
    tmp?.remove();
    if (profile) fs.rmSync(profile, { recursive: true, force: true });
  });

  it('generates a poem, downloads it as .txt, saves it, and shows it in history after a reload', async () => {
    await page.goto(app.url);
    const typeSelect = page.getByLabel('Poem type');
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    await typeSelect.selectOption({ label: 'Sonnet' });
    expect(await page.locator('#type-hint').textContent()).to.match(/Fourteen lines/);
    await page.getByLabel('Theme').fill('harbour lights');
    await page.getByRole('button', { name: 'Generate' }).click();

    const poem = page.locator('#poem-text');
    await poem.waitFor({ state: 'visible' });
    const expected = expectedPoem('sonnet', 'harbour lights');
    expect(await poem.locator('.poem__line').allTextContents()).to.deep.equal(expected.split('\n'));
    expect(await page.locator('#poem-meta').textContent()).to.equal('Sonnet · “harbour lights” · written by strata-test-model');
    expect(await page.getByRole('status').textContent()).to.match(/sonnet by strata-test-model is ready/);
    // Which model writes here, and how to use a real provider.
    expect(await page.locator('#model-note').textContent())
      .to.include('strata-test-model')
      .and.include('API_BASE_URL')
      .and.include('API_KEY')
      .and.include('API_MODEL');
    const sent = upstream.received.at(-1)!;
    expect(sent.body.messages?.[1]?.content).to.include('sonnet').and.include('"harbour lights"');

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: /Download \.txt/ }).click()]);
    expect(download.suggestedFilename()).to.equal('sonnet-harbour-lights.txt');
    const file = await download.path();
    expect(fs.readFileSync(file, 'utf8')).to.equal(`Sonnet: harbour lights\n\n${expected}\n`);

    const save = page.getByRole('button', { name: /Save to history/ });
    await save.click();
    await page.locator('#save', { hasText: 'Saved' }).waitFor();
    expect(await page.locator('#save').isDisabled()).to.equal(true);
    await page.locator('.history__item', { hasText: 'harbour lights' }).waitFor();

    await page.reload();
    const item = page.locator('.history__item').first();
    await item.waitFor();
    expect(await item.locator('.badge').textContent()).to.equal('Sonnet');
    expect(await item.locator('.history__theme').textContent()).to.equal('harbour lights');
    // Opening a saved poem shows it again, ready to download, without offering a second save.
    await item.click();
    expect(await poem.locator('.poem__line').allTextContents()).to.deep.equal(expected.split('\n'));
    // ...with the model that wrote it, kept in the history.
    expect(await page.locator('#poem-meta').textContent()).to.equal('Sonnet · “harbour lights” · written by strata-test-model');
    expect(await page.locator('#download').isEnabled()).to.equal(true);
    expect(await page.locator('#save').isDisabled()).to.equal(true);
  });

  it('deletes a saved poem from history', async () => {
    await page.goto(app.url);
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    await page.getByLabel('Theme').fill('a poem to delete');
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.locator('#poem-text').waitFor({ state: 'visible' });
    await page.getByRole('button', { name: /Save to history/ }).click();
    const entry = page.locator('.history__entry', { hasText: 'a poem to delete' });
    await entry.waitFor();
    await page.getByRole('button', { name: /Delete the .* on “a poem to delete”/ }).click();
    await entry.waitFor({ state: 'detached' });
    expect(await page.getByRole('status').textContent()).to.match(/Deleted the .* on “a poem to delete”/);
    // The poem on screen may be saved again.
    expect(await page.locator('#save').isEnabled()).to.equal(true);
    await page.reload();
    // History loaded: entries shown, or the empty note.
    await page.waitForFunction(() => document.querySelectorAll('.history__entry').length > 0 || !document.getElementById('history-empty')!.hidden);
    expect(await page.locator('.history__entry', { hasText: 'a poem to delete' }).count()).to.equal(0);
  });

  it('explains an upstream refusal in the banner: what went wrong and which setting to change', async () => {
    await page.goto(app.url);
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    upstream.behave({ kind: 'error', status: 401, message: 'Incorrect API key provided' });
    try {
      await page.getByLabel('Theme').fill('storm');
      await page.getByRole('button', { name: 'Generate' }).click();
      const status = page.locator('#status .status--error');
      await status.waitFor();
      expect(await status.textContent()).to.match(/refused the poem app's API key \(HTTP 401\): Incorrect API key provided/);
      expect(await status.locator('.status__hint').textContent())
        .to.include('API_KEY')
        .and.include('API_BASE_URL');
    } finally {
      upstream.behave({ kind: 'poem', content: writePoem });
    }
  });

  it('works from the keyboard: Enter in the theme field generates', async () => {
    await page.goto(app.url);
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    await page.getByLabel('Poem type').focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).to.equal('theme');
    await page.keyboard.type('a lighthouse keeper');
    await page.keyboard.press('Enter');
    await page.locator('#poem-text', { hasText: 'a lighthouse keeper' }).waitFor();
    // The focus moves to the poem so screen readers and keyboard users land on it.
    expect(await page.evaluate(() => document.activeElement?.id)).to.equal('poem-text');
  });

  it('shows an error for an empty theme and does not call the model', async () => {
    await page.goto(app.url);
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    const calls = upstream.received.length;
    await page.getByLabel('Theme').fill('   ');
    await page.getByRole('button', { name: 'Generate' }).click();
    const error = page.locator('#theme-error');
    await error.waitFor({ state: 'visible' });
    expect(await error.textContent()).to.equal('Please enter a theme for your poem.');
    expect(await page.getByLabel('Theme').getAttribute('aria-invalid')).to.equal('true');
    expect(await page.getByRole('status').textContent()).to.equal('A theme is needed before a poem can be written.');
    await page.locator('#status .status--error').waitFor();
    expect(upstream.received.length).to.equal(calls);
  });

  it('shows a clear error when the model upstream fails, and keeps the page usable', async () => {
    await page.goto(app.url);
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    upstream.behave({ kind: 'error', status: 500, message: 'model crashed' });
    try {
      await page.getByLabel('Theme').fill('storm');
      await page.getByRole('button', { name: 'Generate' }).click();
      const status = page.locator('#status .status--error');
      await status.waitFor();
      expect(await status.textContent()).to.match(/Could not write the poem: the model service failed \(HTTP 500\): model crashed/);
      expect(await page.getByRole('button', { name: 'Generate' }).isEnabled()).to.equal(true);
      await page.screenshot({ path: path.join(ARTIFACTS, 'poem-app-error.png') });
    } finally {
      upstream.behave({ kind: 'poem', content: writePoem });
    }
  });

  it('shows the loading state while the model writes, then the timeout error', async () => {
    await page.goto(app.url);
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    upstream.behave({ kind: 'hang' });
    try {
      await page.getByLabel('Poem type').selectOption('ode');
      await page.getByLabel('Theme').fill('patience');
      await page.getByRole('button', { name: 'Generate' }).click();
      await page.locator('#poem-loading').waitFor({ state: 'visible' });
      expect(await page.locator('#result').getAttribute('aria-busy')).to.equal('true');
      expect(await page.locator('#generate').isDisabled()).to.equal(true);
      expect(await page.locator('#generate').innerText()).to.equal('Writing…');
      expect(await page.locator('#status').textContent()).to.equal('Writing your ode on “patience”…');
      await page.screenshot({ path: path.join(ARTIFACTS, 'poem-app-loading.png') });
      const status = page.locator('#status .status--error');
      await status.waitFor();
      expect(await status.textContent()).to.match(/did not answer within 1.5 s/);
      expect(await page.locator('#result').getAttribute('aria-busy')).to.equal('false');
      expect(await page.locator('#generate').isEnabled()).to.equal(true);
    } finally {
      upstream.behave({ kind: 'poem', content: writePoem });
    }
  });

  it('fits a desktop (1366×900) and a phone (390×844): nothing overflows, every control can be clicked; saves screenshots', async () => {
    await page.setViewportSize({ width: 1366, height: 900 });
    await page.goto(app.url);
    await page.waitForFunction(() => !(document.getElementById('poem-type') as HTMLSelectElement).disabled);
    await page.getByLabel('Poem type').selectOption('haiku');
    await page.getByLabel('Theme').fill('first snow over a quiet harbour');
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.locator('#poem-text').waitFor({ state: 'visible' });
    await page.locator('.history__item').first().waitFor();
    expect(await layoutProblems(page, 'body'), 'at 1366×900').to.deep.equal([]);
    expect(await spillsOutOfHistoryCards(page), 'at 1366×900').to.deep.equal([]);
    await page.screenshot({ path: path.join(ARTIFACTS, 'poem-app-desktop.png'), fullPage: true });

    await page.setViewportSize({ width: 390, height: 844 });
    expect(await layoutProblems(page, 'body'), 'at 390×844').to.deep.equal([]);
    expect(await spillsOutOfHistoryCards(page), 'at 390×844').to.deep.equal([]);
    await page.screenshot({ path: path.join(ARTIFACTS, 'poem-app-mobile.png'), fullPage: true });
    // Reduced motion turns transitions off, so the screenshot shows the settled dark theme.
    await page.emulateMedia({ colorScheme: 'dark', reducedMotion: 'reduce' });
    await page.screenshot({ path: path.join(ARTIFACTS, 'poem-app-mobile-dark.png'), fullPage: true });
    await page.emulateMedia({ colorScheme: 'light', reducedMotion: 'no-preference' });
  });
});
