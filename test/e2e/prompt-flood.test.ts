import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { AI_SERVICES, OBJECT_STORE_SERVICES, startPlatform, type RunningPlatform } from '../../images/standalone/src/platform.js';

/** How long /healthz of `url` takes to answer, ms. */
async function healthMs(url: string): Promise<number> {
  const start = performance.now();
  const res = await fetch(`${url}/healthz`);
  await res.arrayBuffer();
  expect(res.status).to.equal(200);
  return performance.now() - start;
}

/**
 * Issue 37 finding 8: the standalone process serves the object store and the model server on one
 * event loop; a huge prompt (the body limit allows ~1 MB) must not hold that loop while it is
 * tokenized, under `npm start`'s default prompt truncation.
 */
describe('e2e: huge prompts to the model server do not stall the gateway of the same process', function () {
  this.timeout(180_000);
  let platform: RunningPlatform;
  let dataDir: string;

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-prompt-flood-'));
    const modelServer = AI_SERVICES.find((s) => s.name === 'model-server')!;
    platform = await startPlatform(
      {
        dataDir,
        host: '127.0.0.1',
        ports: { gateway: 0, dataPlane: 0, controlPlane: 0, modelServer: 0 },
        rootPassword: 'prompt-flood-password',
        purgeSchedule: false,
        logLevel: 'silent',
      },
      [...OBJECT_STORE_SERVICES, modelServer],
    );
  });

  after(async () => {
    await platform?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('the gateway answers /healthz within 500 ms while four 1 MB prompts are served', async () => {
    const gateway = platform.urls.gateway!;
    const completions = `${platform.urls['model-server']}/v1/chat/completions`;
    // 1 MB of distinct words (just within the model server's 1 MiB body limit): a BPE tokenizer's cache cannot make the whole text cheap.
    const prompt = (n: number) =>
      Array.from({ length: 110_000 }, (_, i) => `verse${n}x${i}`)
        .join(' ')
        .slice(0, 1_040_000);
    const prompts = [0, 1, 2, 3].map(prompt);
    expect(Buffer.byteLength(prompts[0]!)).to.be.greaterThan(1_000_000);
    await healthMs(gateway);

    let served = false;
    const flood = Promise.all(
      prompts.map(async (content, n) => {
        const res = await fetch(completions, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: n % 2 ? 'strata-tiny' : 'strata-verse', messages: [{ role: 'user', content }], max_tokens: 4 }),
        });
        const body = (await res.json()) as { usage?: { prompt_tokens: number } };
        expect(res.status, JSON.stringify(body)).to.equal(200);
        expect(body.usage!.prompt_tokens).to.be.at.most(64);
      }),
    ).finally(() => (served = true));
    const latencies: number[] = [];
    while (!served) latencies.push(await healthMs(gateway));
    await flood;
    expect(latencies.length).to.be.greaterThan(0);
    expect(Math.max(...latencies), latencies.map(Math.round).join(',')).to.be.below(500);
  });
});
