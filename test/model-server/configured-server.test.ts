import { expect } from 'chai';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/served-models.js';
import { getJson, modelServerForSuite, postJson } from './helpers.js';

const MODEL = 'strata-tiny';
const user = (content: string) => [{ role: 'user', content }];

describe('model-server configuration: model names, no batching, bounded queue, prompt truncation', () => {
  const ms = modelServerForSuite({
    modelDir: DEFAULT_MODEL_DIR,
    modelNames: ['alpha', 'beta'],
    batching: false,
    maxQueue: 1,
    maxQueuePerCaller: 2,
    truncatePrompt: true,
  });

  it('serves exactly the configured model names', async () => {
    const res = await getJson(`${ms.base}/v1/models`);
    expect(res.body.data.map((m: { id: string }) => m.id)).to.deep.equal(['alpha', 'beta']);
    const ok = await postJson(ms.url, { model: 'beta', messages: user('10 20'), temperature: 0 });
    expect(ok.status).to.equal(200);
    expect(ok.body.model).to.equal('beta');
    expect((await postJson(ms.url, { model: MODEL, messages: user('10') })).status).to.equal(404);
  });

  it('with truncatePrompt keeps the last 64 prompt tokens instead of answering 400', async () => {
    const long = Array.from({ length: 80 }, (_, i) => String(100 + i)).join(' ');
    const res = await postJson(ms.url, { model: 'alpha', messages: user(long), temperature: 0, max_tokens: 4 });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.usage.prompt_tokens).to.equal(64);
  });

  it('answers 429 in OpenAI shape when the queue is full, and serves the rest', async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, () => postJson(ms.url, { model: 'alpha', messages: user('10 20 30 40 50 60 70 80 90 100'), max_tokens: 64, temperature: 0 })),
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
