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
 * tokenized, under `npm start`'s default prompt truncation. What holds it is the tokenizers' work, so
 * that is what the test bounds (in characters, not in time, which a loaded machine would blur): each
 * tokenizer call sees at most the tail a truncated prompt can keep, never the megabyte.
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

  it('tokenizes only the tails of four 1 MB prompts, and the gateway answers /healthz all the while', async () => {
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

    // Every tokenizer call of the process (both models' tokenizers), by the length of the text it got.
    // (Imported as the platform imports the model server, dynamically: the same module instances.)
    const [{ BpeTokenizer }, { MAX_PROMPT_TOKENS }, { ID_TOKENIZER, MAX_TOKEN_CHARS }] = await Promise.all([
      import('../../images/model-server/src/bpe-tokenizer.js'),
      import('../../images/model-server/src/model-spec.js'),
      import('../../images/model-server/src/tokenizer.js'),
    ]);
    const seen: number[] = [];
    const bpeEncode = BpeTokenizer.prototype.encode;
    const idEncode = ID_TOKENIZER.encode;
    BpeTokenizer.prototype.encode = function (this: InstanceType<typeof BpeTokenizer>, text: string, limit?: number) {
      seen.push(text.length);
      return bpeEncode.call(this, text, limit);
    };
    (ID_TOKENIZER as { encode: typeof idEncode }).encode = (text: string, limit?: number) => {
      seen.push(text.length);
      return idEncode(text, limit);
    };
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
    try {
      while (!served) latencies.push(await healthMs(gateway));
      await flood;
    } finally {
      BpeTokenizer.prototype.encode = bpeEncode;
      (ID_TOKENIZER as { encode: typeof idEncode }).encode = idEncode;
    }
    expect(latencies.length).to.be.greaterThan(0);
    expect(seen.length, 'tokenizer calls').to.be.at.least(4);
    expect(Math.max(...seen), 'the longest text a tokenizer was given').to.be.at.most(MAX_PROMPT_TOKENS * MAX_TOKEN_CHARS);
  });
});
