import { expect } from 'chai';
import OpenAI from 'openai';
import { getJson, modelServerForSuite, postJson, postStream } from './helpers.js';

const MODEL = 'strata-tiny';
const user = (content: string) => [{ role: 'user', content }];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function expectError(res: { status: number; body: any }, status: number, param: string | null, code: string): void {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(Object.keys(res.body)).to.deep.equal(['error']);
  expect(res.body.error).to.include({ param, code });
  expect(res.body.error.message).to.be.a('string').and.not.equal('');
  expect(res.body.error.type).to.be.a('string');
}

describe('model-server: what it cannot do is refused in OpenAI shape', () => {
  const ms = modelServerForSuite({ modelNames: [MODEL] });

  describe('prompts past the context', () => {
    it('answers 400 context_length_exceeded for a ~0.9 MB prompt (no stack overflow), and the server keeps serving', async () => {
      const huge = 'a '.repeat(450_000);
      expect(huge.length).to.be.greaterThan(800_000);
      const res = await postJson(ms.url, { model: MODEL, messages: user(huge) });
      expectError(res, 400, 'messages', 'context_length_exceeded');
      expect(res.body.error.type).to.equal('invalid_request_error');
      // Many messages too (one spread per message would not overflow; their total must still be counted).
      const many = Array.from({ length: 20_000 }, () => ({ role: 'user', content: '10 20' }));
      expectError(await postJson(ms.url, { model: MODEL, messages: many }), 400, 'messages', 'context_length_exceeded');
      expect((await postJson(ms.url, { model: MODEL, messages: user('10 20'), temperature: 0 })).body.choices[0].message.content).to.equal('10 20');
    });

    it('answers 400 context_length_exceeded just past the context', async () => {
      const words = Array.from({ length: 63 }, (_, i) => String(100 + i)).join(' ');
      expectError(await postJson(ms.url, { model: MODEL, messages: user(words) }), 400, 'messages', 'context_length_exceeded');
    });
  });

  describe('parameters it cannot honour', () => {
    const refused: Array<[string, Record<string, unknown>]> = [
      ['tools', { tools: [{ type: 'function', function: { name: 'search_by_text', parameters: { type: 'object', properties: {} } } }] }],
      ['tools', { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'auto' }],
      ['tool_choice', { tool_choice: 'required' }],
      ['tool_choice', { tool_choice: { type: 'function', function: { name: 'f' } } }],
      ['functions', { functions: [{ name: 'f', parameters: {} }] }],
      ['response_format', { response_format: { type: 'json_object' } }],
      ['response_format', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {} } } }],
      ['logit_bias', { logit_bias: { 10: 5 } }],
    ];
    for (const [param, extra] of refused) {
      it(`400 unsupported_parameter for ${JSON.stringify(extra)}`, async () => {
        const res = await postJson(ms.url, { model: MODEL, messages: user('10 20'), ...extra });
        expectError(res, 400, param, 'unsupported_parameter');
        expect(res.body.error.type).to.equal('invalid_request_error');
      });
    }

    it('accepts their neutral values (tool_choice "none", text format, empty logit_bias) and penalties', async () => {
      const res = await postJson(ms.url, {
        model: MODEL,
        messages: user('10 20'),
        temperature: 0,
        tools: [{ type: 'function', function: { name: 'f' } }],
        tool_choice: 'none',
        response_format: { type: 'text' },
        presence_penalty: 0,
        frequency_penalty: 0.1,
        logit_bias: {},
        parallel_tool_calls: false,
        user: 'u',
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.choices[0].message.content).to.equal('10 20');
    });

    it('applies presence and frequency penalties in the engine (-2..2, as OpenAI)', async () => {
      const answer = async (extra: Record<string, unknown>) => {
        const res = await postJson(ms.url, { model: MODEL, messages: user('10 10 10 10 10 10'), temperature: 0, ...extra });
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        return res.body.choices[0].message.content as string;
      };
      const plain = await answer({});
      expect(plain).to.equal('10 10 10 10 10 10');
      // Every repeat of 10 costs 2 more: the greedy copy turns to other tokens.
      const penalised = await answer({ frequency_penalty: 2, presence_penalty: 2 });
      expect(penalised.split(' ').filter((t) => t === '10').length).to.be.lessThan(6);
      for (const [param, value] of [
        ['frequency_penalty', 2.5],
        ['presence_penalty', -3],
      ] as const) {
        const res = await postJson(ms.url, { model: MODEL, messages: user('10'), [param]: value });
        expectError(res, 400, param, 'invalid_value');
      }
    });

    it('the official openai client surfaces the refusal as a BadRequestError with param and code', async () => {
      const client = new OpenAI({ baseURL: `${ms.base}/v1`, apiKey: 'unused', maxRetries: 0 });
      try {
        await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: '10' }], response_format: { type: 'json_object' } });
        expect.fail('should throw');
      } catch (err) {
        expect(err).to.be.instanceOf(OpenAI.BadRequestError);
        expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).to.equal('response_format');
        expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).to.equal('unsupported_parameter');
      }
    });
  });

  describe('logprobs', () => {
    const sumExp = (xs: number[]) => xs.reduce((n, x) => n + Math.exp(x), 0);

    it('non-streaming: one entry per generated token, in OpenAI shape, consistent with the content', async () => {
      const res = await postJson(ms.url, { model: MODEL, messages: user('10 20 30'), temperature: 0, logprobs: true, top_logprobs: 3 });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const choice = res.body.choices[0];
      expect(choice.message.content).to.equal('10 20 30');
      expect(Object.keys(choice.logprobs).sort()).to.deep.equal(['content', 'refusal']);
      const entries = choice.logprobs.content;
      expect(entries.map((e: { token: string }) => e.token)).to.deep.equal(['10', ' 20', ' 30']);
      expect(entries.map((e: { token: string }) => e.token).join('')).to.equal(choice.message.content);
      for (const e of entries) {
        expect(Object.keys(e).sort()).to.deep.equal(['bytes', 'logprob', 'token', 'top_logprobs']);
        expect(e.bytes).to.deep.equal([...Buffer.from(e.token)]);
        expect(e.logprob).to.be.at.most(0);
        expect(e.top_logprobs).to.have.length(3);
        // Greedy: the chosen token is the most likely one, listed first with the same log-probability.
        expect(e.top_logprobs[0]).to.deep.equal({ token: e.token, logprob: e.logprob, bytes: e.bytes });
        const lps = e.top_logprobs.map((t: { logprob: number }) => t.logprob);
        expect([...lps].sort((a, b) => b - a)).to.deep.equal(lps);
        expect(sumExp(lps)).to.be.at.most(1 + 1e-6);
      }
      expect(res.body.usage.completion_tokens).to.equal(entries.length);
    });

    it('logprobs without top_logprobs lists no alternatives; logprobs false or absent gives null', async () => {
      const res = await postJson(ms.url, { model: MODEL, messages: user('10 20'), temperature: 0, logprobs: true });
      expect(res.body.choices[0].logprobs.content.map((e: { top_logprobs: unknown[] }) => e.top_logprobs)).to.deep.equal([[], []]);
      expect((await postJson(ms.url, { model: MODEL, messages: user('10 20'), logprobs: false })).body.choices[0].logprobs).to.equal(null);
      expect((await postJson(ms.url, { model: MODEL, messages: user('10 20') })).body.choices[0].logprobs).to.equal(null);
    });

    it('400 for top_logprobs without logprobs, or out of range', async () => {
      expectError(await postJson(ms.url, { model: MODEL, messages: user('10'), top_logprobs: 2 }), 400, 'top_logprobs', 'invalid_value');
      expectError(await postJson(ms.url, { model: MODEL, messages: user('10'), logprobs: true, top_logprobs: 21 }), 400, 'top_logprobs', 'invalid_value');
    });

    it('a stop string keeps the entries of the answer only', async () => {
      const res = await postJson(ms.url, { model: MODEL, messages: user('100 200 300 400'), temperature: 0, stop: [' 300'], logprobs: true });
      expect(res.body.choices[0].message.content).to.equal('100 200');
      expect(res.body.choices[0].logprobs.content.map((e: { token: string }) => e.token)).to.deep.equal(['100', ' 200']);
    });

    it('streaming: each content chunk carries the entries of its tokens, and they add up to the answer', async () => {
      const { status, events } = await postStream(ms.url, {
        model: MODEL,
        messages: user('11 22 33 44'),
        temperature: 0,
        stream: true,
        logprobs: true,
        top_logprobs: 2,
      });
      expect(status).to.equal(200);
      const chunks = events.filter((e) => e !== '[DONE]' && e.choices.length > 0 && e.choices[0].delta.content);
      expect(chunks.length).to.be.greaterThan(0);
      let content = '';
      const tokens: string[] = [];
      for (const c of chunks) {
        content += c.choices[0].delta.content;
        expect(c.choices[0].logprobs.refusal).to.equal(null);
        for (const e of c.choices[0].logprobs.content) {
          tokens.push(e.token);
          expect(e.top_logprobs).to.have.length(2);
        }
      }
      expect(content).to.equal('11 22 33 44');
      expect(tokens.join('')).to.equal(content);
    });

    it('the official openai client reads them', async () => {
      const client = new OpenAI({ baseURL: `${ms.base}/v1`, apiKey: 'unused', maxRetries: 0 });
      const completion = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: '12 13' }],
        temperature: 0,
        logprobs: true,
        top_logprobs: 1,
      });
      expect(completion.choices[0]!.logprobs!.content!.map((e) => e.token)).to.deep.equal(['12', ' 13']);
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: '12 13' }],
        temperature: 0,
        logprobs: true,
        stream: true,
      });
      const streamed: string[] = [];
      for await (const chunk of stream) for (const e of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(e.token);
      expect(streamed).to.deep.equal(['12', ' 13']);
    });
  });

  describe('routes', () => {
    it('answers JSON in OpenAI shape on every route, /v1 or not', async () => {
      for (const path of ['/', '/nope', '/v1/nope', '/favicon.ico', '/api/v1/chat']) {
        const res = await fetch(`${ms.base}${path}`);
        expect(res.status, path).to.equal(404);
        expect(res.headers.get('content-type'), path).to.match(/^application\/json/);
        expectError({ status: res.status, body: await res.json() }, 404, null, 'unknown_url');
      }
      const post = await fetch(`${ms.base}/completions`, { method: 'POST', body: '{}' });
      expect(post.headers.get('content-type')).to.match(/^application\/json/);
      expect(post.status).to.equal(404);
    });

    it("advertises each model's context in /v1/models (max_model_len, as vLLM; prompt and output limits)", async () => {
      const res = await getJson(`${ms.base}/v1/models/${MODEL}`);
      expect(res.body).to.include({ id: MODEL, max_model_len: 128, maxPromptTokens: 64, maxOutputTokens: 64 });
      expect(res.body).to.not.have.any.keys('max_prompt_tokens', 'max_output_tokens');
    });
  });
});

describe('model-server API keys (MODEL_SERVER_API_KEYS)', () => {
  const keys = ['key-one', 'key-two'];
  const ms = modelServerForSuite({ modelNames: [MODEL], apiKeys: keys });

  const call = (path: string, authorization?: string, body?: unknown) =>
    fetch(`${ms.base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it('401 in OpenAI shape without a key or with a wrong one, on every /v1 route (fast path included)', async () => {
    const chat = { model: MODEL, messages: user('10') };
    for (const auth of [undefined, 'Bearer wrong', 'Bearer key-one-and-more', 'Basic a2V5LW9uZQ==', 'Bearer ']) {
      for (const [path, body] of [
        ['/v1/chat/completions', chat],
        ['/v1/models', undefined],
        ['/v1/nope', undefined],
      ] as const) {
        const res = await call(path, auth, body);
        expect(res.headers.get('www-authenticate')).to.equal('Bearer');
        expectError({ status: res.status, body: await res.json() }, 401, null, 'invalid_api_key');
      }
    }
  });

  it('serves requests carrying any configured key; health, readiness and metrics stay open', async () => {
    for (const key of keys) {
      const res = await call('/v1/chat/completions', `Bearer ${key}`, { model: MODEL, messages: user('10 20'), temperature: 0 });
      expect(res.status).to.equal(200);
      expect((await res.json()).choices[0].message.content).to.equal('10 20');
    }
    for (const path of ['/healthz', '/readyz', '/metrics']) expect((await call(path)).status, path).to.equal(200);
  });

  it('works with the official openai client given the key, and 401 as AuthenticationError without it', async () => {
    const good = new OpenAI({ baseURL: `${ms.base}/v1`, apiKey: 'key-two', maxRetries: 0 });
    expect((await good.models.list()).data.map((m) => m.id)).to.deep.equal([MODEL]);
    const bad = new OpenAI({ baseURL: `${ms.base}/v1`, apiKey: 'nope', maxRetries: 0 });
    try {
      await bad.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: '10' }] });
      expect.fail('should throw');
    } catch (err) {
      expect(err).to.be.instanceOf(OpenAI.AuthenticationError);
    }
  });
});
