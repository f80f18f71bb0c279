import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { expect } from 'chai';
import express from 'express';
import { chatCompletionsHandler } from '../../images/model-server/src/chat-completions.js';
import type { GenerationScheduler } from '../../images/model-server/src/generation-scheduler.js';
import { ModelServerMetrics } from '../../images/model-server/src/metrics.js';
import { OPENAI_SAMPLING } from '../../images/model-server/src/served-models.js';
import { ID_TOKENIZER } from '../../images/model-server/src/tokenizer.js';
import { createLogger, createRegistry } from '../../images/service-kit/src/index.js';
import { getJson, modelServerForSuite, postJson } from './helpers.js';

const MODEL = 'strata-tiny';
const user = (content: string) => [{ role: 'user', content }];

describe('model-server /v1/chat/completions errors in OpenAI shape', () => {
  const ms = modelServerForSuite();
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
      [{ ...ok, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', 'array_above_max_length'],
      [{ ...ok, seed: 'x' }, 'seed', 'invalid_type'],
      [{ ...ok, messages: user(Array.from({ length: 80 }, () => '10').join(' ')) }, 'messages', 'context_length_exceeded'],
      [[ok], null, 'invalid_request_body'],
    ];
    for (const [body, param, code] of cases) expectError(await postJson(ms.url, body), 400, param, code, JSON.stringify(body).slice(0, 80));
  });

  it('400 for a body that is not JSON, or empty', async () => {
    expectError(await postJson(ms.url, undefined, { raw: '{"model": "strata-tiny", ' }), 400, null, 'invalid_json');
    expectError(await postJson(ms.url, undefined, { raw: 'model=strata-tiny', contentType: 'application/x-www-form-urlencoded' }), 400, null, 'invalid_json');
    // An empty body reads as an empty object: the first missing parameter is named.
    expectError(await postJson(ms.url, undefined, { raw: '' }), 400, 'model', 'missing_required_parameter');
  });

  it('reads a body the same way with or without Content-Length, compressed, with a byte order mark or a UTF-8 charset', async () => {
    const request = { model: MODEL, messages: user('10 20 30'), temperature: 0 };
    const json = JSON.stringify(request);
    const post = async (body: BodyInit, headers: Record<string, string>) => {
      const res = await fetch(ms.url, { method: 'POST', headers, body, duplex: 'half' } as RequestInit);
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
    const metrics = await (await fetch(`${ms.base}/metrics`)).text();
    expect(metrics).to.match(/http_requests_total\{method="POST",route="\/v1\/chat\/completions",status="200"[^}]*\} [1-9]/);
  });

  it('404 for an unknown model and an unknown URL', async () => {
    expectError(await postJson(ms.url, { model: 'gpt-4o', messages: user('10') }), 404, 'model', 'model_not_found');
    expectError(await postJson(`${ms.base}/v1/completions`, { model: MODEL, prompt: 'x' }), 404, null, 'unknown_url');
    expectError(await getJson(`${ms.base}/v1/models/nope`), 404, 'model', 'model_not_found');
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
    expectError(await postJson(ms.url, huge), 413, null, 'request_too_large');
  });
});
