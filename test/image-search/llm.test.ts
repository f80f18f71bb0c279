import { expect } from 'chai';
import { rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { startModelServer } from '../../images/model-server/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { eventually } from '../support/eventually.js';
import { startFakeLlm, type FakeLlm } from './support/fake-llm.js';
import { AUTH_HEADER, makeImageDir, makeTestModel, startTestImageSearch, tempDir, TEST_API_KEY, type TestImageSearch } from './support/fixtures.js';

async function post(base: string, route: string, payload: unknown) {
  const response = await fetch(base + route, {
    method: 'POST',
    headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

describe('image-search: LLM assistance against an OpenAI-compatible server', function () {
  this.timeout(120_000);
  let llm: FakeLlm;
  let fixture: TestImageSearch;

  before(async () => {
    llm = await startFakeLlm('test-key');
    fixture = await startTestImageSearch('image-search-llm', { LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key', LLM_MODEL: 'strata-test-model' });
    const added = await post(fixture.service.url, '/api/index/add', { image_paths: Object.values(fixture.images.colourFiles).flat() });
    expect(added.body.added).to.have.length(12);
  });
  after(async () => {
    await fixture?.close();
    await llm?.close();
  });

  it('reports the LLM as enabled in /api/status', async () => {
    const status = (await (await fetch(fixture.service.url + '/api/status')).json()) as { llm: Record<string, unknown>; features: Record<string, boolean> };
    expect(status.llm).to.deep.include({ enabled: true, model: 'strata-test-model' });
    expect(status.features).to.deep.include({ queryExpansion: true, chat: true, ragQa: true });
  });

  it('POST /api/search/rag expands the query, merges de-duplicated results by distance and explains them', async () => {
    const { status, body } = await post(fixture.service.url, '/api/search/rag', { query: 'red', topk: 5, use_expansion: true });
    expect(status).to.equal(200);
    expect(body.original_query).to.equal('red');
    expect(body.expanded_queries).to.deep.equal(['red', 'crimson things', 'scarlet objects', 'red pictures']);
    expect(body.ai_explanation).to.equal('These images are mostly red.');
    expect(body.total_results).to.equal(5);
    const ids = body.results.map((r: { id: number }) => r.id);
    expect(new Set(ids).size).to.equal(ids.length);
    for (let i = 1; i < body.results.length; i++) expect(body.results[i].distance).to.be.at.least(body.results[i - 1].distance);
    expect(body.results[0].path).to.match(/red/);
    const request = llm.requests.at(-1)!;
    expect(request.authorization).to.equal('Bearer test-key');
    expect(request.body.model).to.equal('strata-test-model');
    const plain = await post(fixture.service.url, '/api/search/rag', { query: 'red', topk: 3, use_expansion: false });
    expect(plain.body.expanded_queries).to.deep.equal(['red']);
  });

  it('POST /api/search/expand and /api/rag/qa', async () => {
    const expand = await post(fixture.service.url, '/api/search/expand', { query: 'red', n: 2 });
    expect(expand.status).to.equal(200);
    expect(expand.body.expanded_queries).to.deep.equal(['red', 'crimson things', 'scarlet objects']);
    expect((await post(fixture.service.url, '/api/search/expand', { query: '' })).status).to.equal(400);
    const qa = await post(fixture.service.url, '/api/rag/qa', { question: 'which images are red?', topk: 3 });
    expect(qa.status).to.equal(200);
    expect(qa.body.answer).to.equal('The red images are ids listed above.');
    expect(qa.body.results).to.have.length(3);
    const prompt = llm.requests.at(-1)!.body.messages.at(-1)!.content as string;
    expect(prompt).to.contain(`id ${qa.body.results[0].id}`);
  });

  it('POST /api/chat runs the tool-call loop and continues a multi-turn conversation', async () => {
    const first = await post(fixture.service.url, '/api/chat', { messages: [{ role: 'user', content: 'find blue' }] });
    expect(first.status).to.equal(200);
    expect(first.body.toolCalls).to.have.length(1);
    expect(first.body.toolCalls[0]).to.deep.include({ tool: 'search_by_text', arguments: { query: 'blue', topk: 3 } });
    expect(first.body.toolCalls[0].result.results).to.have.length(3);
    expect(first.body.reply).to.equal('I found 3 images.');
    // The tools were offered in function-calling format.
    const offered = llm.requests.find((r) => r.body.tools)!.body.tools as Array<{ type: string; function: { name: string } }>;
    expect(offered.map((t) => t.function.name)).to.include('get_index_status');

    const history = [
      ...first.body.messages.filter((m: { role: string; content?: string }) => m.role === 'user' || (m.role === 'assistant' && m.content)),
      { role: 'user', content: 'and the index status?' },
    ];
    const second = await post(fixture.service.url, '/api/chat', { messages: history });
    expect(second.status).to.equal(200);
    expect(second.body.toolCalls[0].tool).to.equal('get_index_status');
    expect(second.body.reply).to.equal('The index holds 12 vectors.');
    const sent = llm.requests.at(-1)!.body.messages;
    expect(sent.some((m) => m.content === 'I found 3 images.')).to.equal(true);
  });

  it('bounds the tool-call rounds and reports LLM failures as 502', async () => {
    // A model that keeps calling tools gets 4 rounds; then tools are withdrawn and it must answer.
    const loop = await post(fixture.service.url, '/api/chat', { message: 'loop forever' });
    expect(loop.status).to.equal(200);
    expect(loop.body.toolCalls).to.have.length(4);
    expect(loop.body.reply).to.equal('ok');
    expect(llm.requests.at(-1)!.body.tools).to.equal(undefined);
    expect((await post(fixture.service.url, '/api/chat', { messages: [{ role: 'robot', content: 'x' }] })).status).to.equal(400);
    llm.failNext = 2; // the client retries once
    const failed = await post(fixture.service.url, '/api/search/expand', { query: 'red' });
    expect(failed.status).to.equal(502);
    expect(failed.body.error.message).to.match(/LLM request failed/);
  });
});

describe('image-search: LLM failures are told as such (502 with the upstream message, RAG falls back, honest status)', function () {
  this.timeout(120_000);
  let llm: FakeLlm;
  const dirs: string[] = [];
  let modelDir: string;
  let imageDir: string;
  /** Image search with `env`, asking the fake LLM unless `llmBaseUrl` names another upstream. */
  const start = async (env: Record<string, string>, llmBaseUrl = llm.url) => {
    const indexDir = tempDir('image-search-llm-failures');
    dirs.push(indexDir);
    const service = await startImageSearch({
      env: { IMAGE_SEARCH_SCAN_ON_START: 'true', ...env },
      PORT: 0,
      host: '127.0.0.1',
      IMAGE_SEARCH_MODEL_DIR: modelDir,
      IMAGE_FILE_DIR: imageDir,
      IMAGE_SEARCH_INDEX_DIR: indexDir,
      LLM_BASE_URL: llmBaseUrl,
      LLM_API_KEY: 'test-key',
      // post() sends it: a token this service cannot check would be refused.
      IMAGE_SEARCH_API_KEY: TEST_API_KEY,
      logger: pino({ level: 'silent' }),
    });
    // Scanned and checked: the status has the index and the LLM's first answer.
    await eventually(async () => {
      const status = (await (await fetch(`${service.url}/api/status`)).json()) as { index: { totalVectors: number }; llm: { state: string } };
      return status.index.totalVectors >= 12 && status.llm.state !== 'checking';
    }, 'scanned, and the LLM checked');
    return service;
  };
  const llmStatus = async (service: RunningService) => ((await (await fetch(`${service.url}/api/status`)).json()) as { llm: Record<string, unknown> }).llm;

  before(async () => {
    llm = await startFakeLlm('test-key', ['strata-verse', 'strata-tiny']);
    modelDir = makeTestModel();
    imageDir = (await makeImageDir()).dir;
    dirs.push(modelDir, imageDir);
  });
  after(async () => {
    await llm?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('a model the upstream does not offer: 502 with its message (not its 404), RAG answers plain retrieval with a note, the status says error', async () => {
    const service = await start({ LLM_MODEL: 'gpt-4o-mini' });
    try {
      expect(await llmStatus(service)).to.deep.include({ enabled: true, state: 'error', model: 'gpt-4o-mini', modelSource: 'LLM_MODEL' });
      expect((await llmStatus(service)).error).to.match(/does not offer LLM_MODEL=gpt-4o-mini \(it lists strata-verse, strata-tiny\)/);
      const expand = await post(service.url, '/api/search/expand', { query: 'red' });
      expect(expand.status).to.equal(502);
      expect(expand.body.error).to.deep.include({ code: 'upstream_error' });
      expect(expand.body.error.message).to.equal('LLM request failed: the LLM answered 404: The model `gpt-4o-mini` does not exist');
      expect((await post(service.url, '/api/rag/qa', { question: 'which are red?' })).status).to.equal(502);
      expect((await post(service.url, '/api/chat', { message: 'find red' })).status).to.equal(502);

      const rag = await post(service.url, '/api/search/rag', { query: 'red', topk: 3 });
      expect(rag.status).to.equal(200);
      expect(rag.body).to.deep.include({ original_query: 'red', expanded_queries: ['red'], ai_explanation: null, total_results: 3, llmEnabled: true });
      expect(rag.body.results[0].path).to.match(/red/);
      expect(rag.body.note).to.match(/^The LLM failed \(the LLM answered 404: .*\): plain vector retrieval, no explanation\.$/);
    } finally {
      await service.stop();
    }
  });

  it('LLM_MODEL unset: the first model the upstream lists; the status follows the LLM going down and coming back', async () => {
    const service = await start({});
    try {
      expect(await llmStatus(service)).to.deep.include({ enabled: true, state: 'ok', model: 'strata-verse', modelSource: 'upstream /v1/models', error: null });
      const expand = await post(service.url, '/api/search/expand', { query: 'red', n: 2 });
      expect(expand.status).to.equal(200);
      expect(llm.requests.at(-1)!.body.model).to.equal('strata-verse');

      llm.failNext = 1; // LLM_MAX_RETRIES defaults to 0: no retry
      const down = await post(service.url, '/api/search/expand', { query: 'red' });
      expect(down.status).to.equal(502);
      expect(down.body.error.message).to.equal('LLM request failed: the LLM answered 500: upstream exploded');
      expect(await llmStatus(service)).to.deep.include({ state: 'error', error: 'the LLM answered 500: upstream exploded' });
      expect((await post(service.url, '/api/search/expand', { query: 'red' })).status).to.equal(200);
      expect(await llmStatus(service)).to.deep.include({ state: 'ok', error: null });
    } finally {
      await service.stop();
    }
  });

  it("LLM_MODEL unset, pointed at Strata's own model server: strata-verse, the text model, never strata-tiny, which answers token ids", async () => {
    const modelServer = await startModelServer({ port: 0, host: '127.0.0.1', truncatePrompt: true, logger: createLogger('model-server-test', 'silent') });
    const service = await start({}, `${modelServer.url}/v1`);
    // The model server's own count of the completions it answered, by model.
    const answered = async (model: string) => {
      const lines = (await (await fetch(`${modelServer.url}/metrics`)).text()).split('\n');
      return lines
        .filter((l) => l.startsWith('model_server_chat_completions_total{') && l.includes(`model="${model}"`))
        .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    };
    try {
      expect(await llmStatus(service)).to.deep.include({ enabled: true, state: 'ok', model: 'strata-verse', modelSource: 'upstream /v1/models', error: null });
      const expand = await post(service.url, '/api/search/expand', { query: 'red', n: 2 });
      expect(expand.status, JSON.stringify(expand.body)).to.equal(200);
      expect(expand.body.expanded_queries[0]).to.equal('red');
      expect(await answered('strata-verse')).to.equal(1);
      expect(await answered('strata-tiny')).to.equal(0);
    } finally {
      await service.stop();
      await modelServer.stop();
    }
  });

  it("chats with Strata's own model server, which refuses tools: retrieves first, then asks, and says so; the badge stays ok", async () => {
    const modelServer = await startModelServer({ port: 0, host: '127.0.0.1', truncatePrompt: true, logger: createLogger('model-server-test', 'silent') });
    // A CPU model on a loaded machine: room for its answers.
    const service = await start({ LLM_TIMEOUT_SECONDS: '120' }, `${modelServer.url}/v1`);
    try {
      for (const message of ['which images are red?', 'and which are blue?']) {
        const chat = await post(service.url, '/api/chat', { message });
        expect(chat.status, JSON.stringify(chat.body)).to.equal(200);
        expect(chat.body.reply).to.be.a('string');
        expect(chat.body.note).to.match(/does not accept tools: the images were retrieved/);
        expect(chat.body.toolCalls).to.have.length(1);
        expect(chat.body.toolCalls[0]).to.deep.include({ tool: 'search_by_text', arguments: { query: message, topk: 5 } });
        expect(chat.body.toolCalls[0].result.results).to.have.length(5);
        expect(chat.body.messages.at(-1)).to.deep.equal({ role: 'assistant', content: chat.body.reply });
        expect(await llmStatus(service)).to.deep.include({ state: 'ok', error: null });
      }
    } finally {
      await service.stop();
      await modelServer.stop();
    }
  });

  it('a hanging LLM costs a search at most LLM_TIMEOUT_SECONDS: RAG answers plain retrieval, ai_explanation null and a note', async function () {
    this.timeout(60_000);
    const sockets = new Set<Socket>();
    // Accepts every request and never answers.
    const hanging = http.createServer(() => undefined);
    hanging.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    const service = await start({ LLM_MODEL: 'strata-verse', LLM_TIMEOUT_SECONDS: '1' }, `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/v1`);
    try {
      const started = Date.now();
      const rag = await post(service.url, '/api/search/rag', { query: 'red', topk: 3 });
      const seconds = (Date.now() - started) / 1000;
      expect(rag.status).to.equal(200);
      expect(rag.body).to.deep.include({ expanded_queries: ['red'], ai_explanation: null, total_results: 3 });
      expect(rag.body.note).to.match(/^The LLM failed \(.*timed out.*\): plain vector retrieval, no explanation\.$/i);
      // One timeout (expansion), no retry, no second call: 1 s plus a generous margin for a loaded machine.
      expect(seconds).to.be.below(10);
    } finally {
      await service.stop();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => hanging.close(resolve));
    }
  });
});
