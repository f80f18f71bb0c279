import { expect } from 'chai';
import OpenAI from 'openai';
import { getJson, modelServerForSuite, postJson, postStream, randomPrompts } from './helpers.js';

const MODEL = 'strata-tiny';
const user = (content: string) => [{ role: 'user' as const, content }];

describe('model-server /v1/chat/completions', () => {
  const ms = modelServerForSuite();

  describe('response contract', () => {
    it('answers with exactly the OpenAI chat.completion shape', async () => {
      const before = Math.floor(Date.now() / 1000);
      const res = await postJson(ms.url, { model: MODEL, messages: user('10 20 30'), temperature: 0 });
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
      const res = await postJson(ms.url, { model: MODEL, messages: user('hello strata 5'), temperature: 0 });
      expect(res.status).to.equal(200);
      expect(res.body.choices[0].message.content).to.match(/^(\d+( \d+)*)?$/);
      expect(res.body.usage.prompt_tokens).to.equal(5);
    });

    it('max_tokens and max_completion_tokens cut generation with finish_reason "length"', async () => {
      for (const limit of [{ max_tokens: 3 }, { max_completion_tokens: 2 }]) {
        const n = Object.values(limit)[0]!;
        const res = await postJson(ms.url, { model: MODEL, messages: user('11 12 13 14 15 16 17 18'), temperature: 0, ...limit });
        expect(res.status).to.equal(200);
        expect(res.body.choices[0].finish_reason).to.equal('length');
        expect(res.body.choices[0].message.content).to.equal(['11', '12', '13'].slice(0, n).join(' '));
        expect(res.body.usage.completion_tokens).to.equal(n);
      }
    });

    it('stop strings end the content before the match with finish_reason "stop"', async () => {
      const res = await postJson(ms.url, { model: MODEL, messages: user('100 200 300 400'), temperature: 0, stop: [' 300', 'xyz'] });
      expect(res.status).to.equal(200);
      expect(res.body.choices[0].message.content).to.equal('100 200');
      expect(res.body.choices[0].finish_reason).to.equal('stop');
      expect(res.body.usage.completion_tokens).to.equal(3);
    });

    it('n gives that many choices, indexed, with usage summed over them', async () => {
      const res = await postJson(ms.url, { model: MODEL, messages: user('50 60 70'), n: 3, temperature: 0.7, seed: 5 });
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
      const a = await postJson(ms.url, request);
      const b = await postJson(ms.url, request);
      expect(a.status).to.equal(200);
      expect(b.body.choices.map((c: { message: unknown }) => c.message)).to.deep.equal(a.body.choices.map((c: { message: unknown }) => c.message));
    });

    it('a seed gives the same answer streamed or not; other seeds sample other answers', async () => {
      const request = { model: MODEL, messages: user('10 200 30 400 50 600 70'), temperature: 2, seed: 99 };
      const plain = await postJson(ms.url, request);
      const { events } = await postStream(ms.url, { ...request, stream: true });
      const streamed = events
        .slice(0, -1)
        .flatMap((c) => c.choices)
        .map((c: { delta: { content?: string } }) => c.delta.content ?? '')
        .join('');
      expect(streamed).to.equal(plain.body.choices[0].message.content);
      const others = await Promise.all([1, 2, 3].map((seed) => postJson(ms.url, { ...request, seed })));
      const contents = new Set([plain, ...others].map((r) => r.body.choices[0].message.content));
      expect(contents.size, [...contents].join(' | ')).to.be.greaterThan(1);
    });

    it('temperature 0 is greedy, and a tiny top_p is greedy at any temperature', async () => {
      const greedy = await postJson(ms.url, { model: MODEL, messages: user('123 456 789 321'), temperature: 0 });
      expect(greedy.body.choices[0].message.content).to.equal('123 456 789 321');
      const nucleus = await postJson(ms.url, { model: MODEL, messages: user('123 456 789 321'), temperature: 2, top_p: 0.000001, n: 3 });
      expect(nucleus.status).to.equal(200);
      for (const c of nucleus.body.choices) expect(c.message.content).to.equal('123 456 789 321');
    });

    it('accepts the request fields it ignores (user, logprobs: false, nulls) as OpenAI does', async () => {
      const res = await postJson(ms.url, {
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
      const res = await postJson(ms.url, {
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
      const answers = await Promise.all(prompts.map((ids) => postJson(ms.url, { model: MODEL, messages: user(ids.join(' ')), temperature: 0 })));
      const exact = answers.filter((res, i) => res.body.choices[0].message.content === prompts[i]!.join(' ')).length;
      // The training report measured 96% on its own held-out set; chance is < 1/990 per prompt.
      expect(exact / prompts.length).to.be.at.least(0.85);
    });
  });

  describe('streaming', () => {
    it('sends chat.completion.chunk events: role, content deltas, finish_reason, usage, [DONE]', async () => {
      const plain = await postJson(ms.url, { model: MODEL, messages: user('31 41 59 26 53'), temperature: 0 });
      const { status, contentType, events } = await postStream(ms.url, {
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
      const { events } = await postStream(ms.url, { model: MODEL, messages: user('111 222 333 444'), temperature: 0, stream: true, stop: '333' });
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

  describe('the official openai client', () => {
    it('creates completions, streams, lists models and surfaces errors', async () => {
      const client = new OpenAI({ baseURL: `${ms.base}/v1`, apiKey: 'strata-dummy-key', maxRetries: 0 });
      const completion = await client.chat.completions.create({
        model: MODEL,
        messages: user('77 88 99'),
        temperature: 0,
        max_tokens: 10,
      });
      expect(completion.object).to.equal('chat.completion');
      expect(completion.choices[0]!.message.content).to.equal('77 88 99');
      expect(completion.usage?.total_tokens).to.equal(8);

      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: user('77 88 99'),
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
        await client.chat.completions.create({ model: 'no-such-model', messages: user('10') });
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
      const solo = await Promise.all(prompts.slice(0, 4).map((ids) => postJson(ms.url, { model: MODEL, messages: user(ids.join(' ')), temperature: 0 })));
      const results = await Promise.all(
        prompts.map(async (ids, i) => {
          const body = { model: MODEL, messages: user(ids.join(' ')), temperature: 0 };
          if (i % 3 === 0) {
            const { status, events } = await postStream(ms.url, { ...body, stream: true });
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
          const res = await postJson(ms.url, body);
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
      const metrics = await (await fetch(`${ms.base}/metrics`)).text();
      const single = Number(/model_server_batch_size_bucket\{le="1"[^}]*\} (\d+)/.exec(metrics)![1]);
      const steps = Number(/model_server_batch_size_count\{[^}]*\} (\d+)/.exec(metrics)![1]);
      expect(steps - single, 'decode steps with more than one sequence').to.be.greaterThan(0);
    });
  });

  describe('models, health and metrics', () => {
    it('GET /v1/models lists the built-in models in OpenAI list shape', async () => {
      const res = await getJson(`${ms.base}/v1/models`);
      expect(res.status).to.equal(200);
      expect(res.body.object).to.equal('list');
      expect(res.body.data.map((m: { id: string }) => m.id)).to.deep.equal(['strata-verse', MODEL]);
      expect(res.body.data[1]).to.include({ id: MODEL, object: 'model', owned_by: 'strata' });
      expect(res.body.data[1].created).to.be.a('number');
      expect((await getJson(`${ms.base}/v1/models/${MODEL}`)).body.id).to.equal(MODEL);
    });

    it('/healthz and /readyz (model loaded) answer 200; /metrics exposes generation metrics', async () => {
      expect((await getJson(`${ms.base}/healthz`)).status).to.equal(200);
      const ready = await getJson(`${ms.base}/readyz`);
      expect(ready.status).to.equal(200);
      expect(ready.body.checks).to.deep.equal({ model: 'ok' });
      await postJson(ms.url, { model: MODEL, messages: user('10 11'), temperature: 0 });
      const metrics = await (await fetch(`${ms.base}/metrics`)).text();
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
