import { expect } from 'chai';
import { systemPrompt } from '../../images/image-search/src/llm/assistant.js';
import { startFakeLlm, type FakeLlm } from './support/fake-llm.js';
import { AUTH_HEADER, startTestImageSearch, type TestImageSearch, waitForVectors } from './support/fixtures.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const post = async (base: string, route: string, payload: unknown): Promise<Json> => {
  const response = await fetch(base + route, {
    method: 'POST',
    headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  expect(response.status, route).to.equal(200);
  return response.json();
};

describe('image-search: what the page and the LLM are told (weak matches, the encoder, where to log in)', function () {
  this.timeout(120_000);
  let llm: FakeLlm;
  let fixture: TestImageSearch;
  let base: string;

  before(async () => {
    llm = await startFakeLlm('test-key');
    fixture = await startTestImageSearch('search-hints', {
      IMAGE_SEARCH_SCAN_ON_START: true,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: 'test-key',
      STRATA_JWT_SECRET: 'search-hints-test-jwt-secret-0123456789',
      IMAGE_SEARCH_S3_ENDPOINT: 'http://127.0.0.1:9000/',
    });
    base = fixture.service.url;
    await waitForVectors(base, 14);
  });
  after(async () => {
    await fixture?.close();
    await llm?.close();
  });

  it('flags a query nothing matches well (under the encoder’s cut-off) and not one that matches', async () => {
    const nonsense = await post(base, '/search', { query: 'xyzzy qwerty', topk: 5 });
    expect(nonsense.total_results).to.equal(5);
    expect(nonsense.weakMatch).to.equal(true);
    expect(nonsense.bestSimilarity).to.be.below(0.5);
    expect(nonsense.hint).to.match(/^No image matches this query well \(best similarity 0\.\d{3}, below 0\.5 for strata-test-clip\)/);
    const red = await post(base, '/search', { query: 'red', topk: 5 });
    expect(red).to.include({ weakMatch: false });
    expect(red.bestSimilarity).to.be.above(0.9);
    expect(red).to.not.have.property('hint');
    // The AI-assisted search says it too, beside the LLM's explanation.
    const rag = await post(base, '/api/search/rag', { query: 'xyzzy qwerty', topk: 5, use_expansion: false });
    expect(rag).to.include({ weakMatch: true, llmEnabled: true });
    expect(rag.hint).to.match(/^No image matches this query well/);
  });

  it('tells the LLM which encoder finds the images: the test encoder is not called CLIP', async () => {
    llm.requests.length = 0;
    await post(base, '/api/search/rag', { query: 'red', topk: 3, use_expansion: true });
    const systems = llm.requests.map((r) => r.body.messages.find((m) => m.role === 'system')?.content ?? '');
    expect(systems.length).to.be.at.least(2);
    for (const s of systems) {
      expect(s).to.not.match(/found by CLIP/);
      expect(s).to.include('Images are found by strata-test-clip, a test encoder that is not CLIP: it matches colours and textures only');
    }
    expect(systemPrompt({ backbone: 'ViT-B/32', testEncoder: false })).to.include('Images are found by CLIP ViT-B/32 embeddings');
    expect(systemPrompt(null)).to.include('No image encoder is loaded');
  });

  it('tells the page where gateway tokens come from (POST /login at the S3 endpoint)', async () => {
    const status = (await (await fetch(`${base}/api/status`)).json()) as Json;
    expect(status.auth.loginUrl).to.equal('http://127.0.0.1:9000/login');
  });
});
