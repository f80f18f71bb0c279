import { once } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import { requestCaller } from '../../images/model-server/src/app.js';
import { chatCompletionsHandler } from '../../images/model-server/src/chat-completions.js';
import { QueueFullError, type SequenceQueue, type SequenceRequest } from '../../images/model-server/src/generation-scheduler.js';
import { ModelServerMetrics } from '../../images/model-server/src/metrics.js';
import { OPENAI_SAMPLING } from '../../images/model-server/src/served-models.js';
import { ID_TOKENIZER } from '../../images/model-server/src/tokenizer.js';
import { createLogger, createRegistry, FairPool, trustedProxies } from '../../images/service-kit/src/index.js';
import { eventually } from '../support/eventually.js';
import { modelServerForSuite } from './helpers.js';

const MODEL = 'strata-tiny';
const KEYS = ['key-of-tenant-a-0123456789', 'key-of-tenant-b-0123456789'];

/** POST a completion with `key`; its status and error code (if any). */
async function complete(url: string, key: string, n = 1, headers: Record<string, string> = {}): Promise<{ status: number; code?: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: '10 20' }], n, max_tokens: 2 }),
  });
  const body = (await res.json()) as { error?: { code?: string } };
  return { status: res.status, code: body.error?.code };
}

/**
 * The completions handler over an engine that holds every sequence until the test finishes it, refusing past
 * 4 (as the real one past maxQueue); each caller may hold 2.
 */
async function heldEngine(callerOf: (req: http.IncomingMessage) => string) {
  const held: SequenceRequest[] = [];
  const queue: SequenceQueue = {
    enqueue: (requests) => {
      if (held.length + requests.length > 4) throw new QueueFullError(held.length);
      held.push(...requests);
      return requests.map((r) => ({ cancel: () => held.splice(held.indexOf(r), 1) }));
    },
  };
  const handler = chatCompletionsHandler({
    models: new Map([[MODEL, { tokenizer: ID_TOKENIZER, sampling: OPENAI_SAMPLING, scheduler: () => queue, shares: new FairPool(4, 2) }]]),
    metrics: new ModelServerMetrics(createRegistry('model-server-test')),
    logger: createLogger('model-server-test', 'silent'),
    callerOf,
  });
  const app = express();
  app.post('/v1/chat/completions', express.json(), (req, res, next) => void handler(req, res).catch(next));
  const listener = app.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  return {
    url: `http://127.0.0.1:${(listener.address() as AddressInfo).port}/v1/chat/completions`,
    held,
    finishAll() {
      while (held.length) {
        const seq = held.shift()!;
        seq.onToken(11);
        seq.onFinish('stop');
      }
    },
    close: () => listener.close(),
  };
}

describe('model-server: one caller cannot take the whole generation queue', () => {
  it("a caller that floods the queue is refused past its share; another caller's request is still queued and answered", async () => {
    const engine = await heldEngine((req) => String(req.headers.authorization));
    const { url, held } = engine;
    try {
      // Tenant A sends four requests at once: two are queued (its cap), two refused with 429.
      const flood = Array.from({ length: 4 }, () => complete(url, KEYS[0]!));
      await eventually(() => expect(held).to.have.length(2));
      // Tenant B is not refused: its request is queued beside A's and answered once generated.
      const other = complete(url, KEYS[1]!);
      await eventually(() => expect(held).to.have.length(3));
      engine.finishAll();
      expect(await other).to.deep.equal({ status: 200, code: undefined });
      const answers = await Promise.all(flood);
      expect(answers.filter((a) => a.status === 200)).to.have.length(2);
      expect(answers.filter((a) => a.status === 429).map((a) => a.code)).to.deep.equal(['queue_share', 'queue_share']);
    } finally {
      engine.close();
    }
  });

  describe('without keys, a caller is its address: behind an ingress, the one X-Forwarded-For names', () => {
    /** Two choices at once from a client the header names; its status and error code. */
    const fromClient = (url: string, client: string) => complete(url, 'no key', 2, { 'x-forwarded-for': client });

    it('the ingress trusted (STRATA_TRUST_PROXY): one client holding its share leaves room for another', async () => {
      const engine = await heldEngine(requestCaller(() => '', trustedProxies('loopback')));
      try {
        const first = fromClient(engine.url, '203.0.113.1');
        await eventually(() => expect(engine.held).to.have.length(2));
        const second = fromClient(engine.url, '203.0.113.2');
        await eventually(() => expect(engine.held).to.have.length(4));
        engine.finishAll();
        expect([await first, await second]).to.deep.equal([
          { status: 200, code: undefined },
          { status: 200, code: undefined },
        ]);
      } finally {
        engine.close();
      }
    });

    it('no proxy trusted (the default): the header is not believed, so both are the peer, one caller', async () => {
      const engine = await heldEngine(requestCaller(() => '', trustedProxies()));
      try {
        const first = fromClient(engine.url, '203.0.113.1');
        await eventually(() => expect(engine.held).to.have.length(2));
        expect(await fromClient(engine.url, '203.0.113.2')).to.deep.equal({ status: 429, code: 'queue_share' });
        engine.finishAll();
        expect(await first).to.deep.equal({ status: 200, code: undefined });
      } finally {
        engine.close();
      }
    });
  });

  describe('on the server, each API key is a caller', () => {
    // batching off: 1 decoding + 3 waiting = 4 sequences; each key may hold 2 by default.
    const ms = modelServerForSuite({ apiKeys: KEYS, batching: false, maxQueue: 3 });

    it('a request of more choices than a key may hold is refused 429 queue_share; the other key is served', async () => {
      expect(await complete(ms.url, KEYS[0]!, 3)).to.deep.equal({ status: 429, code: 'queue_share' });
      expect((await complete(ms.url, KEYS[1]!, 2)).status).to.equal(200);
      expect((await complete(ms.url, KEYS[0]!, 2)).status).to.equal(200);
    });
  });
});
