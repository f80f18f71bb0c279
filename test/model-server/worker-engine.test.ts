import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import { chatCompletionsHandler } from '../../images/model-server/src/chat-completions.js';
import { DEFAULT_MODEL_DIR, startModelServer } from '../../images/model-server/src/app.js';
import { modelServerConfigFromEnv } from '../../images/model-server/src/config.js';
import { ModelServerMetrics } from '../../images/model-server/src/metrics.js';
import { OPENAI_SAMPLING } from '../../images/model-server/src/served-models.js';
import { ID_TOKENIZER } from '../../images/model-server/src/tokenizer.js';
import { WorkerEngine } from '../../images/model-server/src/worker-engine.js';
import { createLogger, createRegistry } from '../../images/service-kit/src/index.js';
import { eventually } from '../support/eventually.js';
import { postJson, postStream } from './helpers.js';

const MODEL = 'strata-tiny';
const user = (content: string) => [{ role: 'user', content }];
const logger = createLogger('model-server-test', 'silent');

describe('model-server generation worker thread', () => {
  it('a worker that dies fails the requests in flight with 503 (streamed or not), reports not ready, and is restarted', async () => {
    const registry = createRegistry('model-server-test');
    const metrics = new ModelServerMetrics(registry);
    const engine = await WorkerEngine.start({
      modelDir: DEFAULT_MODEL_DIR,
      maxBatch: 32,
      batchWindowMs: 0,
      maxQueue: 16,
      logger,
      observer: metrics,
      restartDelayMs: 500,
      workerEntry: new URL('./fixtures/stand-in-engine-worker.ts', import.meta.url),
    });
    const app = express();
    app.post(
      '/v1/chat/completions',
      express.json(),
      chatCompletionsHandler({
        models: new Map([[MODEL, { tokenizer: ID_TOKENIZER, sampling: OPENAI_SAMPLING, scheduler: () => (engine.ready ? engine : undefined) }]]),
        metrics,
        logger,
      }),
    );
    const listener = app.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    try {
      const url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/v1/chat/completions`;
      const ok = await postJson(url, { model: MODEL, messages: user('10 20 30') });
      expect(ok.status).to.equal(200);
      expect(ok.body.choices[0].message.content).to.equal('10 20 30');

      // One request that never finishes, then a streamed one whose worker crashes after its first token.
      const hanging = postJson(url, { model: MODEL, messages: user('11 998'), n: 2 });
      await eventually(() => engine.activeCount >= 2, 'both choices of the hanging request in flight');
      const streamed = await postStream(url, { model: MODEL, messages: user('12 999'), stream: true });
      const plain = await hanging;

      expect(plain.status).to.equal(503);
      expect(plain.body.error).to.include({ type: 'server_error', code: 'model_not_ready', param: null });
      expect(plain.headers.get('retry-after')).to.equal('1');
      // The stream had started (200, role chunk, the token) before the crash: the error comes as an event.
      expect(streamed.status).to.equal(200);
      const chunks = streamed.events.slice(0, -1);
      expect(streamed.events.at(-1)).to.equal('[DONE]');
      expect(chunks[0].choices[0].delta).to.deep.equal({ role: 'assistant', content: '' });
      expect(chunks.at(-1).error).to.include({ type: 'server_error', code: 'model_not_ready' });
      expect(engine.activeCount + engine.queueDepth).to.equal(0);

      // Until the new worker is up (restartDelayMs, then its start), requests answer 503 model_not_ready; then it serves again.
      expect(engine.ready).to.equal(false);
      const meanwhile = await postJson(url, { model: MODEL, messages: user('10') });
      expect(meanwhile.status).to.equal(503);
      expect(meanwhile.body.error.code).to.equal('model_not_ready');
      await eventually(() => engine.ready, 'the new worker ready');
      expect(engine.starts).to.equal(2);
      const again = await postJson(url, { model: MODEL, messages: user('40 50') });
      expect(again.status).to.equal(200);
      expect(again.body.choices[0].message.content).to.equal('40 50');
      const text = await registry.metrics();
      const errors = text.split('\n').filter((l) => l.startsWith('model_server_chat_completions_total{') && l.includes('outcome="error"'));
      expect(errors.map((l) => l.split(' ').at(-1))).to.deep.equal(['1', '1']); // stream true and false
      expect(text).to.match(/^model_server_queue_depth(\{[^}]*\})? 0$/m);
    } finally {
      listener.close();
      await engine.close();
    }
  });

  it('MODEL_SERVER_WORKER: unset keeps the default (worker thread), false/0/no turn it off', () => {
    expect(modelServerConfigFromEnv({}).worker).to.equal(undefined);
    expect(modelServerConfigFromEnv({ MODEL_SERVER_WORKER: 'true' }).worker).to.equal(true);
    for (const off of ['false', '0', 'no']) expect(modelServerConfigFromEnv({ MODEL_SERVER_WORKER: off }).worker).to.equal(false);
    expect(() => modelServerConfigFromEnv({ MODEL_SERVER_WORKER: 'maybe' })).to.throw(/MODEL_SERVER_WORKER/);
  });

  it('with worker: false (MODEL_SERVER_WORKER=false) the engine runs on the HTTP thread and answers the same', async () => {
    const servers = await Promise.all([false, true].map((worker) => startModelServer({ port: 0, host: '127.0.0.1', logger, worker })));
    try {
      const body = { model: MODEL, messages: user('10 20 30 40'), temperature: 0, n: 2, stop: '30' };
      const [inThread, inWorker] = await Promise.all(servers.map((s) => postJson(`${s.url}/v1/chat/completions`, body)));
      expect(inThread.status).to.equal(200);
      expect(inThread.body.choices.map((c: { message: { content: string } }) => c.message.content)).to.deep.equal(['10 20 ', '10 20 ']);
      expect(inWorker.body.choices).to.deep.equal(inThread.body.choices);
      expect((await fetch(`${servers[0]!.url}/readyz`)).status).to.equal(200);
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  });

  it('a model that cannot be loaded fails the start (no worker left behind)', async () => {
    const err = await WorkerEngine.start({ modelDir: '/nonexistent/model', maxBatch: 1, batchWindowMs: 0, maxQueue: 1, logger }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).to.match(/could not be loaded/);
  });

  it('the real worker streams tokens and honours stop strings and cancellation', async () => {
    const registry = createRegistry('model-server-test');
    const metrics = new ModelServerMetrics(registry);
    const engine = await WorkerEngine.start({ modelDir: DEFAULT_MODEL_DIR, maxBatch: 32, batchWindowMs: 0, maxQueue: 64, logger, observer: metrics });
    try {
      const { TokenSampler } = await import('../../images/model-server/src/token-sampler.js');
      const run = (prompt: number[], stopAt?: number) =>
        new Promise<{ tokens: number[]; reason: string }>((resolve, reject) => {
          const tokens: number[] = [];
          engine.enqueue([
            {
              prompt,
              maxTokens: 64,
              sampler: new TokenSampler({ temperature: 0, topP: 1 }),
              onToken: (id) => {
                tokens.push(id);
                return id === stopAt;
              },
              onFinish: (reason) => resolve({ tokens, reason }),
              onError: reject,
            },
          ]);
        });
      const prompt = [5, 100, 200, 300, 400, 2];
      expect(await run(prompt)).to.deep.equal({ tokens: [100, 200, 300, 400], reason: 'stop' });
      expect(await run(prompt, 200)).to.deep.equal({ tokens: [100, 200], reason: 'stop' });
      // A cancelled sequence gets no more callbacks; the engine empties.
      let after = 0;
      const [handle] = engine.enqueue([
        {
          prompt,
          maxTokens: 64,
          sampler: new TokenSampler({ temperature: 0, topP: 1 }),
          onToken: () => {
            after++;
            return false;
          },
          onFinish: () => expect.fail('a cancelled sequence must not finish'),
          onError: (e) => expect.fail(e.message),
        },
      ]);
      handle!.cancel();
      const seen = after;
      await run(prompt);
      expect(after).to.equal(seen);
      expect(engine.activeCount + engine.queueDepth).to.equal(0);
      expect(Number(/^model_server_generated_tokens_total(?:\{[^}]*\})? (\d+)$/m.exec(await registry.metrics())?.[1])).to.be.greaterThan(10);
    } finally {
      await engine.close();
    }
  });
});
