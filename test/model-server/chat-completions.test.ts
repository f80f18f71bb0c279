import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { expect } from 'chai';
import express from 'express';
import OpenAI from 'openai';
import { startModelServer } from '../../images/model-server/src/app.js';
import { chatCompletionsHandler } from '../../images/model-server/src/chat-completions.js';
import type { GenerationScheduler } from '../../images/model-server/src/generation-scheduler.js';
import { ModelServerMetrics } from '../../images/model-server/src/metrics.js';
import { OPENAI_SAMPLING } from '../../images/model-server/src/served-models.js';
import { ID_TOKENIZER } from '../../images/model-server/src/tokenizer.js';
import { createLogger, createRegistry, type RunningService } from '../../images/service-kit/src/index.js';
import { getJson, postJson, postStream, randomPrompts } from './helpers.js';

const MODEL = 'strata-tiny';
const user = (content: string) => [{ role: 'user', content }];

describe('model-server /v1/chat/completions', () => {
  let server: RunningService;
  let url: string;

  before(async () => {
    server = await startModelServer({ port: 0, host: '127.0.0.1', logger: createLogger('model-server-test', 'silent') });
    url = `${server.url}/v1/chat/completions`;
  });
  after(async () => server.stop());

  describe('response contract', () => {
    it('answers with exactly the OpenAI chat.completion shape', async () => {
      const before = Math.floor(Date.now() / 1000);
      const res = await postJson(url, { model: MODEL, messages: user('10 20 30'), temperature: 0 });
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      const body = res.body;
      expect(Object.keys(body).sort()).to.deep.equal(['choices', 'created', 'id', 'model', 'object', 'usage']);
      expect(body.id).to.match(/^chatcmpl-[A-Za-z0-9]{16,}$/);
      expect(body.object).to.equal('chat.completion');
      expect(body.created)
        .to.be.a('number')
        .and.be.at.least(before)
        .and.be.at.most(Math.floor(Date.now() / 1000));
      expect(body.model).to.equal(MODEL);
      expect(body.choices).to.have.length(1);
      const [choice] = body.choices;
      expect(Object.keys(choice).sort()).to.deep.equal(['finish_reason', 'index', 'logprobs', 'message']);
      expect(choice.index).to.equal(0);
      expect(choice.message.role).to.equal('assistant');
      expect(choice.message.content).to.equal('10 20 30');
      expect(choice.finish_reason).to.equal('stop');
      // USER marker + 3 ids + EOS; three generated ids.
      expect(body.usage).to.deep.equal({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
    });

    it('returns generated token ids joined by single spaces, and words outside the id range still tokenize', async () => {
      const res = await postJson(url, { model: MODEL, messages: user('hello strata 5'), temperature: 0 });
      expect(res.status).to.equal(200);
      expect(res.body.choices[0].message.content).to.match(/^(\d+( \d+)*)?$/);
      expect(res.body.usage.prompt_tokens).to.equal(5);
    });

    it('max_tokens and max_completion_tokens cut generation with finish_reason "length"', async () => {
      for (const limit of [{ max_tokens: 3 }, { max_completion_tokens: 2 }]) {
        const n = Object.values(limit)[0]!;
        const res = await postJson(url, { model: MODEL, messages: user('11 12 13 14 15 16 17 18'), temperature: 0, ...limit });
        expect(res.status).to.equal(200);
        expect(res.body.choices[0].finish_reason).to.equal('length');
        expect(res.body.choices[0].message.content).to.equal(['11', '12', '13'].slice(0, n).join(' '));
        expect(res.body.usage.completion_tokens).to.equal(n);
      }
    });

    it('stop strings end the content before the match with finish_reason "stop"', async () => {
      const res = await postJson(url, { model: MODEL, messages: user('100 200 300 400'), temperature: 0, stop: [' 300', 'xyz'] });
      expect(res.status).to.equal(200);
      expect(res.body.choices[0].message.content).to.equal('100 200');
      expect(res.body.choices[0].finish_reason).to.equal('stop');
      expect(res.body.usage.completion_tokens).to.equal(3);
    });

    it('n gives that many choices, indexed, with usage summed over them', async () => {
      const res = await postJson(url, { model: MODEL, messages: user('50 60 70'), n: 3, temperature: 0.7, seed: 5 });
      expect(res.status).to.equal(200);
      expect(res.body.choices.map((c: { index: number }) => c.index)).to.deep.equal([0, 1, 2]);
      const generated = res.body.choices.reduce(
        (n: number, c: { message: { content: string } }) => n + (c.message.content ? c.message.content.split(' ').length : 0),
        0,
      );
      expect(res.body.usage.completion_tokens).to.equal(generated);
      expect(res.body.usage.total_tokens).to.equal(res.body.usage.prompt_tokens + generated);
    });

    it('the same seed gives the same sampled answer', async () => {
      const request = { model: MODEL, messages: user('10 200 30 400 50 600 70'), temperature: 1.5, top_p: 0.95, seed: 1234, n: 2 };
      const a = await postJson(url, request);
      const b = await postJson(url, request);
      expect(a.status).to.equal(200);
      expect(b.body.choices.map((c: { message: unknown }) => c.message)).to.deep.equal(a.body.choices.map((c: { message: unknown }) => c.message));
    });

    it('a seed gives the same answer streamed or not; other seeds sample other answers', async () => {
      const request = { model: MODEL, messages: user('10 200 30 400 50 600 70'), temperature: 2, seed: 99 };
      const plain = await postJson(url, request);
      const { events } = await postStream(url, { ...request, stream: true });
      const streamed = events
        .slice(0, -1)
        .flatMap((c) => c.choices)
        .map((c: { delta: { content?: string } }) => c.delta.content ?? '')
        .join('');
      expect(streamed).to.equal(plain.body.choices[0].message.content);
      const others = await Promise.all([1, 2, 3].map((seed) => postJson(url, { ...request, seed })));
      const contents = new Set([plain, ...others].map((r) => r.body.choices[0].message.content));
      expect(contents.size, [...contents].join(' | ')).to.be.greaterThan(1);
    });

    it('temperature 0 is greedy, and a tiny top_p is greedy at any temperature', async () => {
      const greedy = await postJson(url, { model: MODEL, messages: user('123 456 789 321'), temperature: 0 });
      expect(greedy.body.choices[0].message.content).to.equal('123 456 789 321');
      const nucleus = await postJson(url, { model: MODEL, messages: user('123 456 789 321'), temperature: 2, top_p: 0.000001, n: 3 });
      expect(nucleus.status).to.equal(200);
      for (const c of nucleus.body.choices) expect(c.message.content).to.equal('123 456 789 321');
    });

    it('accepts the request fields it ignores (user, logprobs: false, nulls) as OpenAI does', async () => {
      const res = await postJson(url, {
        model: MODEL,
        messages: [
          { role: 'system', content: 'copy' },
          { role: 'user', content: [{ type: 'text', text: '10 20' }] },
        ],
        temperature: null,
        top_p: null,
        seed: null,
        stop: null,
        n: null,
        max_tokens: null,
        user: 'someone',
        logprobs: false,
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.choices).to.have.length(1);
    });

    it('accepts a conversation with earlier tool calls and results as text, when no tools are offered', async () => {
      const res = await postJson(url, {
        model: MODEL,
        messages: [
          { role: 'system', content: 'find images' },
          { role: 'user', content: 'red cars' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'search_by_text', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: '{"results":[]}' },
        ],
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.choices[0].message).to.not.have.property('tool_calls');
      expect(res.body.choices[0].message.content).to.be.a('string');
    });
  });

  describe('the trained model', () => {
    it('copies held-out prompts correctly at temperature 0', async () => {
      const prompts = randomPrompts(40, 2026);
      const answers = await Promise.all(prompts.map((ids) => postJson(url, { model: MODEL, messages: user(ids.join(' ')), temperature: 0 })));
      const exact = answers.filter((res, i) => res.body.choices[0].message.content === prompts[i]!.join(' ')).length;
      // The training report measured 96% on its own held-out set; chance is < 1/990 per prompt.
      expect(exact / prompts.length).to.be.at.least(0.85);
    });
  });

  describe('streaming', () => {
    it('sends chat.completion.chunk events: role, content deltas, finish_reason, usage, [DONE]', async () => {
      const plain = await postJson(url, { model: MODEL, messages: user('31 41 59 26 53'), temperature: 0 });
      const { status, contentType, events } = await postStream(url, {
        model: MODEL,
        messages: user('31 41 59 26 53'),
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      });
      expect(status).to.equal(200);
      expect(contentType).to.match(/^text\/event-stream/);
      expect(events.at(-1)).to.equal('[DONE]');
      const chunks = events.slice(0, -1);
      const ids = new Set(chunks.map((c) => c.id));
      expect(ids.size).to.equal(1);
      expect([...ids][0]).to.match(/^chatcmpl-/);
      for (const c of chunks) {
        expect(c.object).to.equal('chat.completion.chunk');
        expect(c.model).to.equal(MODEL);
        expect(c.created).to.be.a('number');
      }
      expect(chunks[0].choices[0].delta.role).to.equal('assistant');
      const usageChunk = chunks.at(-1);
      expect(usageChunk.choices).to.deep.equal([]);
      expect(usageChunk.usage).to.deep.equal(plain.body.usage);
      const finish = chunks.at(-2);
      expect(finish.choices[0].finish_reason).to.equal('stop');
      expect(finish.choices[0].delta).to.deep.equal({});
      const content = chunks
        .flatMap((c) => c.choices)
        .map((c: { delta: { content?: string } }) => c.delta.content ?? '')
        .join('');
      expect(content).to.equal(plain.body.choices[0].message.content);
    });

    it('without include_usage sends no usage chunk; stop strings are never streamed', async () => {
      const { events } = await postStream(url, { model: MODEL, messages: user('111 222 333 444'), temperature: 0, stream: true, stop: '333' });
      const chunks = events.slice(0, -1);
      expect(chunks.every((c) => c.usage === undefined)).to.equal(true);
      const content = chunks
        .flatMap((c) => c.choices)
        .map((c: { delta: { content?: string } }) => c.delta.content ?? '')
        .join('');
      expect(content).to.equal('111 222 ');
      expect(chunks.at(-1).choices[0].finish_reason).to.equal('stop');
    });
  });

  describe('errors in OpenAI shape', () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const expectError = (res: { status: number; body: any }, status: number, param: string | null, code?: string | null, what = '') => {
      expect(res.status, `${what} → ${JSON.stringify(res.body)}`).to.equal(status);
      expect(Object.keys(res.body)).to.deep.equal(['error']);
      expect(Object.keys(res.body.error).sort()).to.deep.equal(['code', 'message', 'param', 'type']);
      expect(res.body.error.message).to.be.a('string').and.not.equal('');
      expect(res.body.error.param, what).to.equal(param);
      if (code !== undefined) expect(res.body.error.code, what).to.equal(code);
      if (status < 500 && status !== 429) expect(res.body.error.type).to.equal('invalid_request_error');
    };

    it('400 for invalid requests, naming the parameter', async () => {
      const ok = { model: MODEL, messages: user('10') };
      const cases: Array<[unknown, string | null, string]> = [
        [{ model: MODEL }, 'messages', 'missing_required_parameter'],
        [{ messages: user('10') }, 'model', 'missing_required_parameter'],
        [{ ...ok, messages: 'hi' }, 'messages', 'invalid_type'],
        [{ ...ok, messages: [] }, 'messages', 'invalid_value'],
        [{ ...ok, messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role', 'invalid_value'],
        [{ ...ok, messages: [{ role: 'user', content: 42 }] }, 'messages[0].content', 'invalid_type'],
        [{ ...ok, messages: [{ role: 'user' }] }, 'messages[0].content', 'invalid_value'],
        [{ ...ok, model: 7 }, 'model', 'invalid_type'],
        [{ ...ok, max_tokens: 0 }, 'max_tokens', 'invalid_value'],
        [{ ...ok, max_tokens: 100000 }, 'max_tokens', 'invalid_value'],
        [{ ...ok, max_tokens: 2.5 }, 'max_tokens', 'invalid_type'],
        [{ ...ok, max_tokens: '5' }, 'max_tokens', 'invalid_type'],
        [{ ...ok, max_completion_tokens: -1 }, 'max_completion_tokens', 'invalid_value'],
        [{ ...ok, temperature: 3 }, 'temperature', 'invalid_value'],
        [{ ...ok, top_p: 1.5 }, 'top_p', 'invalid_value'],
        [{ ...ok, n: 0 }, 'n', 'invalid_value'],
        [{ ...ok, stream: 'yes' }, 'stream', 'invalid_type'],
        [{ ...ok, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', 'invalid_value'],
        [{ ...ok, seed: 'x' }, 'seed', 'invalid_type'],
        [{ ...ok, messages: user(Array.from({ length: 80 }, () => '10').join(' ')) }, 'messages', 'context_length_exceeded'],
        [[ok], null, 'invalid_request_body'],
      ];
      for (const [body, param, code] of cases) expectError(await postJson(url, body), 400, param, code, JSON.stringify(body).slice(0, 80));
    });

    it('400 for a body that is not JSON, or empty', async () => {
      expectError(await postJson(url, undefined, { raw: '{"model": "strata-tiny", ' }), 400, null, 'invalid_json');
      expectError(await postJson(url, undefined, { raw: 'model=strata-tiny', contentType: 'application/x-www-form-urlencoded' }), 400, null, 'invalid_json');
      // An empty body reads as an empty object: the first missing parameter is named.
      expectError(await postJson(url, undefined, { raw: '' }), 400, 'model', 'missing_required_parameter');
    });

    it('reads a body the same way with or without Content-Length, compressed, with a byte order mark or a UTF-8 charset', async () => {
      const request = { model: MODEL, messages: user('10 20 30'), temperature: 0 };
      const json = JSON.stringify(request);
      const post = async (body: BodyInit, headers: Record<string, string>) => {
        const res = await fetch(url, { method: 'POST', headers, body, duplex: 'half' } as RequestInit);
        return { status: res.status, body: (await res.json()) as { choices?: Array<{ message: { content: string } }>; error?: { code: string } } };
      };
      const chunked = () => new Blob([json]).stream(); // no Content-Length: Transfer-Encoding chunked
      const answers = [
        await post(json, { 'content-type': 'application/json' }),
        await post(chunked(), { 'content-type': 'application/json' }),
        await post(gzipSync(json), { 'content-type': 'application/json', 'content-encoding': 'gzip' }),
        await post(`\ufeff${json}`, { 'content-type': 'application/json; charset=UTF-8' }),
        await post(json, { 'content-type': 'text/plain' }),
      ];
      for (const a of answers) {
        expect(a.status).to.equal(200);
        expect(a.body.choices![0]!.message.content).to.equal('10 20 30');
      }
      for (const bad of [await post('{"model"', {}), await post(new Blob(['{"model"']).stream(), {})]) {
        expect(bad.status).to.equal(400);
        expect(bad.body.error!.code).to.equal('invalid_json');
      }
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).to.match(/http_requests_total\{method="POST",route="\/v1\/chat\/completions",status="200"[^}]*\} [1-9]/);
    });

    it('404 for an unknown model and an unknown URL', async () => {
      expectError(await postJson(url, { model: 'gpt-4o', messages: user('10') }), 404, 'model', 'model_not_found');
      expectError(await postJson(`${server.url}/v1/completions`, { model: MODEL, prompt: 'x' }), 404, null, 'unknown_url');
      expectError(await getJson(`${server.url}/v1/models/nope`), 404, 'model', 'model_not_found');
    });

    it('503 in OpenAI shape while the model is not loaded', async () => {
      const app = express();
      app.post(
        '/v1/chat/completions',
        express.json(),
        chatCompletionsHandler({
          models: new Map([[MODEL, { tokenizer: ID_TOKENIZER, sampling: OPENAI_SAMPLING, scheduler: () => undefined }]]),
          metrics: new ModelServerMetrics(createRegistry('model-server-test')),
          logger: createLogger('model-server-test', 'silent'),
        }),
      );
      const listener = app.listen(0, '127.0.0.1');
      await once(listener, 'listening');
      try {
        const res = await postJson(`http://127.0.0.1:${(listener.address() as AddressInfo).port}/v1/chat/completions`, { model: MODEL, messages: user('10') });
        expectError(res, 503, null, 'model_not_ready');
        expect(res.body.error.type).to.equal('server_error');
        expect(res.headers.get('retry-after')).to.equal('1');
      } finally {
        listener.close();
      }
    });

    it('a client that disconnects cancels its sequences, and the request is settled', async () => {
      const cancelled: number[] = [];
      let enqueued = 0;
      // A scheduler that never finishes a sequence: only the disconnect can end the request.
      const scheduler = {
        enqueue: (requests: unknown[]) =>
          requests.map((_, i) => {
            enqueued++;
            return { cancel: () => cancelled.push(i) };
          }),
      } as unknown as GenerationScheduler;
      const registry = createRegistry('model-server-test');
      let settled = 0;
      const handler = chatCompletionsHandler({
        models: new Map([[MODEL, { tokenizer: ID_TOKENIZER, sampling: OPENAI_SAMPLING, scheduler: () => scheduler }]]),
        metrics: new ModelServerMetrics(registry),
        logger: createLogger('model-server-test', 'silent'),
      });
      const app = express();
      app.post('/v1/chat/completions', express.json(), async (req, res) => {
        await handler(req, res);
        settled++;
      });
      const listener = app.listen(0, '127.0.0.1');
      await once(listener, 'listening');
      try {
        const base = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/v1/chat/completions`;
        for (const stream of [false, true]) {
          const abort = new AbortController();
          const pending = fetch(base, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            signal: abort.signal,
            body: JSON.stringify({ model: MODEL, messages: user('10 20'), n: 2, stream }),
          })
            .then((r) => r.text())
            .catch((err: Error) => err.name);
          while (enqueued < (stream ? 4 : 2)) await new Promise((r) => setTimeout(r, 5));
          abort.abort();
          expect(await pending).to.equal('AbortError');
        }
        while (settled < 2) await new Promise((r) => setTimeout(r, 5));
        expect(cancelled).to.deep.equal([0, 1, 0, 1]);
        const lines = (await registry.metrics()).split('\n').filter((l) => l.startsWith('model_server_chat_completions_total{'));
        expect(lines.filter((l) => l.includes('outcome="cancelled"') && l.endsWith(' 1'))).to.have.length(2);
        expect(lines.filter((l) => l.includes('outcome="ok"'))).to.deep.equal([]);
      } finally {
        listener.close();
      }
    });

    it('413 for an oversized body', async () => {
      const huge = { model: MODEL, messages: user('10 '.repeat(600_000)) };
      expectError(await postJson(url, huge), 413, null, 'request_too_large');
    });
  });

  describe('the official openai client', () => {
    it('creates completions, streams, lists models and surfaces errors', async () => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'strata-dummy-key', maxRetries: 0 });
      const completion = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: '77 88 99' }],
        temperature: 0,
        max_tokens: 10,
      });
      expect(completion.object).to.equal('chat.completion');
      expect(completion.choices[0]!.message.content).to.equal('77 88 99');
      expect(completion.usage?.total_tokens).to.equal(8);

      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: '77 88 99' }],
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined | null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      expect(text).to.equal('77 88 99');
      expect(usage?.completion_tokens).to.equal(3);

      const models = await client.models.list();
      expect(models.data.map((m) => m.id)).to.deep.equal(['strata-verse', MODEL]);

      try {
        await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: '10' }] });
        expect.fail('should throw');
      } catch (err) {
        expect(err).to.be.instanceOf(OpenAI.NotFoundError);
        expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).to.equal('model_not_found');
      }
    });
  });

  describe('concurrency and batching', () => {
    it('answers many concurrent clients, each well-formed with a unique id, decoding them in shared batches', async () => {
      const prompts = randomPrompts(48, 7);
      const solo = await Promise.all(prompts.slice(0, 4).map((ids) => postJson(url, { model: MODEL, messages: user(ids.join(' ')), temperature: 0 })));
      const results = await Promise.all(
        prompts.map(async (ids, i) => {
          const body = { model: MODEL, messages: user(ids.join(' ')), temperature: 0 };
          if (i % 3 === 0) {
            const { status, events } = await postStream(url, { ...body, stream: true });
            expect(status).to.equal(200);
            expect(events.at(-1)).to.equal('[DONE]');
            const chunks = events.slice(0, -1);
            return {
              id: chunks[0].id,
              content: chunks
                .flatMap((c) => c.choices)
                .map((c: { delta: { content?: string } }) => c.delta.content ?? '')
                .join(''),
            };
          }
          const res = await postJson(url, body);
          expect(res.status).to.equal(200);
          expect(res.body.object).to.equal('chat.completion');
          expect(res.body.choices[0].message.content).to.match(/^(\d+( \d+)*)?$/);
          expect(res.body.usage.total_tokens).to.equal(res.body.usage.prompt_tokens + res.body.usage.completion_tokens);
          return { id: res.body.id, content: res.body.choices[0].message.content };
        }),
      );
      expect(new Set(results.map((r) => r.id)).size).to.equal(prompts.length);
      // Batched greedy decoding gives the same answers as decoding alone.
      solo.forEach((res, i) => expect(results[i]!.content).to.equal(res.body.choices[0].message.content));
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      const single = Number(/model_server_batch_size_bucket\{le="1"[^}]*\} (\d+)/.exec(metrics)![1]);
      const steps = Number(/model_server_batch_size_count\{[^}]*\} (\d+)/.exec(metrics)![1]);
      expect(steps - single, 'decode steps with more than one sequence').to.be.greaterThan(0);
    });
  });

  describe('models, health and metrics', () => {
    it('GET /v1/models lists the built-in models in OpenAI list shape', async () => {
      const res = await getJson(`${server.url}/v1/models`);
      expect(res.status).to.equal(200);
      expect(res.body.object).to.equal('list');
      expect(res.body.data.map((m: { id: string }) => m.id)).to.deep.equal(['strata-verse', MODEL]);
      expect(res.body.data[1]).to.include({ id: MODEL, object: 'model', owned_by: 'strata' });
      expect(res.body.data[1].created).to.be.a('number');
      expect((await getJson(`${server.url}/v1/models/${MODEL}`)).body.id).to.equal(MODEL);
    });

    it('/healthz and /readyz (model loaded) answer 200; /metrics exposes generation metrics', async () => {
      expect((await getJson(`${server.url}/healthz`)).status).to.equal(200);
      const ready = await getJson(`${server.url}/readyz`);
      expect(ready.status).to.equal(200);
      expect(ready.body.checks).to.deep.equal({ model: 'ok' });
      await postJson(url, { model: MODEL, messages: user('10 11'), temperature: 0 });
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      for (const name of [
        'model_server_chat_completions_total',
        'model_server_generated_tokens_total',
        'model_server_tokens_per_second',
        'model_server_queue_depth',
        'model_server_time_to_first_token_seconds_bucket',
        'model_server_time_per_output_token_seconds_bucket',
        'http_requests_total',
      ])
        expect(metrics).to.include(name);
      expect(Number(/model_server_generated_tokens_total\{[^}]*\} (\d+)/.exec(metrics)![1])).to.be.greaterThan(0);
      expect(metrics).to.match(/model_server_chat_completions_total\{[^}]*outcome="ok"[^}]*\} [1-9]/);
    });
  });
});

describe('model-server configuration: model names, no batching, bounded queue, prompt truncation', () => {
  let server: RunningService;

  before(async () => {
    server = await startModelServer({
      port: 0,
      host: '127.0.0.1',
      logger: createLogger('model-server-test', 'silent'),
      modelNames: ['alpha', 'beta'],
      batching: false,
      maxQueue: 1,
      truncatePrompt: true,
    });
  });
  after(async () => server.stop());

  it('serves exactly the configured model names', async () => {
    const res = await getJson(`${server.url}/v1/models`);
    expect(res.body.data.map((m: { id: string }) => m.id)).to.deep.equal(['alpha', 'beta']);
    const ok = await postJson(`${server.url}/v1/chat/completions`, { model: 'beta', messages: user('10 20'), temperature: 0 });
    expect(ok.status).to.equal(200);
    expect(ok.body.model).to.equal('beta');
    expect((await postJson(`${server.url}/v1/chat/completions`, { model: MODEL, messages: user('10') })).status).to.equal(404);
  });

  it('with truncatePrompt keeps the last 64 prompt tokens instead of answering 400', async () => {
    const long = Array.from({ length: 80 }, (_, i) => String(100 + i)).join(' ');
    const res = await postJson(`${server.url}/v1/chat/completions`, { model: 'alpha', messages: user(long), temperature: 0, max_tokens: 4 });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.usage.prompt_tokens).to.equal(64);
  });

  it('answers 429 in OpenAI shape when the queue is full, and serves the rest', async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        postJson(`${server.url}/v1/chat/completions`, { model: 'alpha', messages: user('10 20 30 40 50 60 70 80 90 100'), max_tokens: 64, temperature: 0 }),
      ),
    );
    const statuses = results.map((r) => r.status);
    expect(
      statuses.every((s) => s === 200 || s === 429),
      statuses.join(','),
    ).to.equal(true);
    expect(statuses).to.include(429);
    expect(statuses).to.include(200);
    const rejected = results.find((r) => r.status === 429)!;
    expect(rejected.body.error).to.include({ type: 'rate_limit_error', code: 'queue_full', param: null });
    expect(rejected.headers.get('retry-after')).to.equal('1');
    for (const r of results.filter((r) => r.status === 200)) expect(r.body.choices[0].message.content).to.match(/^\d+( \d+)*$/);
  });
});
