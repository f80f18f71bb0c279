import { rm } from 'node:fs/promises';
import { expect } from 'chai';
import { startPlatform, type RunningPlatform } from '../../images/standalone/src/platform.js';
import { makeTestModel, tempDir } from '../image-search/support/fixtures.js';
import { freePort } from '../support/ports.js';

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/**
 * Issue 37 finding 10: with MODEL_SERVER_API_KEYS set, `npm start`'s own clients of the model server
 * (the poem app; image search's LLM when it names that server) send its key without being told.
 */
describe('e2e: the standalone platform wires the model server’s key to its own clients', function () {
  this.timeout(180_000);
  const KEY = 'sk-local-model-server-key';
  let platform: RunningPlatform;
  let dataDir: string;
  let modelDir: string;

  before(async () => {
    dataDir = tempDir('standalone-keys');
    modelDir = makeTestModel();
    const modelServerPort = await freePort();
    platform = await startPlatform({
      dataDir,
      host: '127.0.0.1',
      ports: { gateway: 0, dataPlane: 0, controlPlane: 0, modelServer: modelServerPort, poemApp: 0, imageSearch: 0 },
      rootPassword: 'standalone-keys-password',
      purgeSchedule: false,
      logLevel: 'silent',
      env: {
        MODEL_SERVER_API_KEYS: `${KEY},sk-another-key`,
        // Named as a user would: localhost, not the 127.0.0.1 the server reports.
        LLM_BASE_URL: `http://localhost:${modelServerPort}/v1`,
        IMAGE_SEARCH_MODEL_DIR: modelDir,
      },
    });
  });

  after(async () => {
    await platform?.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(modelDir, { recursive: true, force: true });
  });

  it('the model server asks for its key; the poem app and image search’s LLM send it', async () => {
    const chat = { model: 'strata-tiny', messages: [{ role: 'user', content: '10 20' }], max_tokens: 2 };
    expect((await post(`${platform.urls['model-server']}/v1/chat/completions`, chat)).status).to.equal(401);
    expect((await post(`${platform.urls['model-server']}/v1/chat/completions`, chat, { authorization: `Bearer ${KEY}` })).status).to.equal(200);

    const poem = await post(`${platform.urls['poem-app']}/api/generate-poem`, { type: 'haiku', theme: 'rain on the sea' });
    expect(poem.status, JSON.stringify(poem.json)).to.equal(200);
    const expanded = await post(`${platform.urls['image-search']}/api/search/expand`, { query: 'a red square', n: 2 });
    expect(expanded.status, JSON.stringify(expanded.json)).to.equal(200);
  });
});
