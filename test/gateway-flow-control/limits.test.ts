import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Cluster, Redis } from 'ioredis';
import { parseFlowRules } from '../../images/gateway/src/flow-control/index.js';
import { S3Error } from '../../images/object-model/src/index.js';
import { sendJson } from '../../images/service-kit/src/index.js';
import { freePorts } from '../support/ports.js';
import { sharedRedisCluster } from '../support/redis-cluster.js';
import { eventually, hit, metricValue, startTestGateway, type TestGateway } from './support.js';

describe('gateway flow control: rate and concurrency limits', function () {
  this.timeout(60_000);
  const gateways: TestGateway[] = [];
  const start = async (...args: Parameters<typeof startTestGateway>) => {
    const g = await startTestGateway(...args);
    gateways.push(g);
    return g;
  };
  afterEach(async () => {
    for (const g of gateways.splice(0)) await g.stop();
  });

  it('limits each user separately: the one over the limit gets SlowDown with Retry-After, others go on', async () => {
    const g = await start({ rules: parseFlowRules('rateLimits: { users: { default: { points: 3, duration: 60 } } }') });
    for (let i = 0; i < 3; i++) expect((await hit(`${g.url}/GetObject/k`, 'alice')).status).to.equal(200);
    const rejected = await hit(`${g.url}/GetObject/k`, 'alice');
    expect(rejected.status).to.equal(503);
    expect(rejected.body).to.contain('<Code>SlowDown</Code>');
    expect(Number(rejected.retryAfter)).to.be.within(1, 60);
    expect((await hit(`${g.url}/GetObject/k`, 'bob')).status).to.equal(200);
    // Anonymous requests have no user limit.
    expect((await hit(`${g.url}/GetObject/k`)).status).to.equal(200);
    expect(g.served.get('GetObject')).to.equal(5);
    expect(await metricValue(g.registry, 'strata_gateway_rate_limit_rejections_total', { route: 'GetObject', user_class: 'default', scope: 'user' })).to.equal(
      1,
    );
  });

  it('answers a rejected HEAD with the status and Retry-After only', async () => {
    const g = await start({ rules: parseFlowRules('rateLimits: { routes: { HeadObject: { points: 1, duration: 60 } } }') });
    expect((await fetch(`${g.url}/HeadObject/k`, { method: 'HEAD' })).status).to.equal(200);
    const rejected = await fetch(`${g.url}/HeadObject/k`, { method: 'HEAD' });
    expect(rejected.status).to.equal(503);
    expect(rejected.headers.get('retry-after')).to.match(/^\d+$/);
    expect(await rejected.text()).to.equal('');
  });

  it("hands the SlowDown error to a render callback (the gateway's own error renderer)", async () => {
    const seen: S3Error[] = [];
    const g = await start({
      rules: parseFlowRules('rateLimits: { routes: { GetObject: { points: 1, duration: 60 } } }'),
      render: (err, _req, res) => {
        seen.push(err);
        sendJson(res, { rendered: err.code, retryAfter: res.getHeader('retry-after') }, err.status);
      },
    });
    await hit(`${g.url}/GetObject/k`);
    const rejected = await hit(`${g.url}/GetObject/k`);
    expect(rejected.status).to.equal(503);
    expect(JSON.parse(rejected.body)).to.deep.equal({ rendered: 'SlowDown', retryAfter: rejected.retryAfter });
    expect(seen).to.have.length(1);
    expect(seen[0]).to.be.instanceOf(S3Error);
  });

  it('gives a user class its own limit', async () => {
    const g = await start({
      rules: parseFlowRules(`
rateLimits:
  users:
    default: { points: 100, duration: 60 }
    classes:
      batch: { points: 1, duration: 60, users: [etl-bot] }
`),
    });
    expect((await hit(`${g.url}/PutObject/a`, 'etl-bot')).status).to.equal(200);
    expect((await hit(`${g.url}/PutObject/a`, 'etl-bot')).status).to.equal(503);
    for (let i = 0; i < 5; i++) expect((await hit(`${g.url}/PutObject/a`, 'carol')).status).to.equal(200);
    expect(await metricValue(g.registry, 'strata_gateway_rate_limit_rejections_total', { user_class: 'batch', scope: 'user' })).to.equal(1);
  });

  it('limits a route for all callers together, other routes unaffected', async () => {
    const g = await start({ rules: parseFlowRules('{"rateLimits": {"routes": {"PutObject": {"points": 2, "duration": 60}}}}') });
    expect((await hit(`${g.url}/PutObject/a`, 'alice')).status).to.equal(200);
    expect((await hit(`${g.url}/PutObject/b`, 'bob')).status).to.equal(200);
    const rejected = await hit(`${g.url}/PutObject/c`, 'carol');
    expect(rejected.status).to.equal(503);
    expect(rejected.body).to.contain('<Code>SlowDown</Code>');
    expect(rejected.retryAfter).to.match(/^\d+$/);
    expect((await hit(`${g.url}/GetObject/a`, 'carol')).status).to.equal(200);
    expect(g.served.get('PutObject')).to.equal(2);
    expect(await metricValue(g.registry, 'strata_gateway_rate_limit_rejections_total', { route: 'PutObject', scope: 'route' })).to.equal(1);
  });

  it('limits requests in flight per route and frees the slot when a request ends', async () => {
    const g = await start({ rules: parseFlowRules('concurrency: { routes: { hold: 2 } }') });
    const first = hit(`${g.url}/hold/1`, 'alice');
    const second = hit(`${g.url}/hold/2`, 'bob');
    await eventually(() => g.holds.length === 2, 'two requests in flight');
    expect(await metricValue(g.registry, 'strata_gateway_in_flight_requests', { route: 'hold' })).to.equal(2);
    const third = await hit(`${g.url}/hold/3`, 'carol');
    expect(third.status).to.equal(503);
    expect(third.body).to.contain('<Code>SlowDown</Code>');
    expect(third.retryAfter).to.equal('1');
    // Other routes have no limit.
    expect((await hit(`${g.url}/GetObject/x`, 'carol')).status).to.equal(200);
    g.holds.shift()!();
    expect((await first).status).to.equal(200);
    await eventually(async () => (await metricValue(g.registry, 'strata_gateway_in_flight_requests', { route: 'hold' })) === 1, 'slot freed');
    const fourth = hit(`${g.url}/hold/4`, 'carol');
    await eventually(() => g.holds.length === 2, 'the freed slot taken');
    for (const release of g.holds.splice(0)) release();
    expect((await second).status).to.equal(200);
    expect((await fourth).status).to.equal(200);
    expect(await metricValue(g.registry, 'strata_gateway_concurrency_rejections_total', { route: 'hold' })).to.equal(1);
  });

  it('frees the slot when the client goes away mid-request', async () => {
    const g = await start({ rules: parseFlowRules('concurrency: { routes: { hold: 1 } }') });
    const aborter = new AbortController();
    const gone = fetch(`${g.url}/hold/1`, { signal: aborter.signal }).catch(() => 'aborted');
    await eventually(() => g.holds.length === 1, 'request in flight');
    aborter.abort();
    expect(await gone).to.equal('aborted');
    await eventually(async () => (await metricValue(g.registry, 'strata_gateway_in_flight_requests', { route: 'hold' })) === 0, 'slot freed');
    const next = hit(`${g.url}/hold/2`);
    await eventually(() => g.holds.length === 2, 'next request admitted');
    for (const release of g.holds.splice(0)) release();
    expect((await next).status).to.equal(200);
  });

  it('shares limits between two gateway replicas through Redis (6379)', async () => {
    const prefix = `strata-test:flow:${randomUUID()}:`;
    const redisA = new Redis({ host: '127.0.0.1', port: 6379 });
    const redisB = new Redis({ host: '127.0.0.1', port: 6379 });
    try {
      // Until a client is ready the limiter answers from its per-replica insurance counter.
      await Promise.all([redisA.ping(), redisB.ping()]);
      const rules = parseFlowRules('rateLimits: { users: { default: { points: 4, duration: 60 } } }');
      const a = await start({ rules, redis: redisA, redisKeyPrefix: prefix });
      const b = await start({ rules, redis: redisB, redisKeyPrefix: prefix });
      for (const g of [a, b, a, b]) expect((await hit(`${g.url}/GetObject/k`, 'dave')).status).to.equal(200);
      // Each replica has seen only two of dave's requests, yet both refuse the fifth.
      for (const g of [a, b]) expect((await hit(`${g.url}/GetObject/k`, 'dave')).status).to.equal(503);
      expect((await hit(`${b.url}/GetObject/k`, 'erin')).status).to.equal(200);
      const keys = await redisA.keys(`${prefix}*`);
      expect(keys.length).to.be.greaterThan(0);
      // A replica with its own (memory) counters does not see the others' requests.
      const solo = await start({ rules });
      expect((await hit(`${solo.url}/GetObject/k`, 'dave')).status).to.equal(200);
    } finally {
      const keys = await redisA.keys(`${prefix}*`);
      if (keys.length) await redisA.del(...keys);
      redisA.disconnect();
      redisB.disconnect();
    }
  });

  it('keeps limiting per replica, without waiting, while Redis is down', async () => {
    const [deadPort] = await freePorts(1);
    const down = new Redis({ host: '127.0.0.1', port: deadPort!, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    down.on('error', () => undefined);
    try {
      const g = await start({ rules: parseFlowRules('rateLimits: { users: { default: { points: 2, duration: 60 } } }'), redis: down });
      for (const status of [200, 200, 503]) expect((await hit(`${g.url}/GetObject/k`, 'frank')).status).to.equal(status);
      expect((await hit(`${g.url}/GetObject/k`, 'gina')).status).to.equal(200);
    } finally {
      down.disconnect();
    }
  });

  it('shares limits through a Redis Cluster client as well', async () => {
    const cluster = await sharedRedisCluster();
    const prefix = `strata-test:flow:${randomUUID()}:`;
    const clientA = new Cluster(cluster.nodes);
    const clientB = new Cluster(cluster.nodes);
    try {
      await Promise.all([clientA, clientB].map((c) => new Promise((resolve) => c.once('ready', resolve))));
      const rules = parseFlowRules('rateLimits: { routes: { PutObject: { points: 2, duration: 60 } } }');
      const a = await start({ rules, redis: clientA, redisKeyPrefix: prefix });
      const b = await start({ rules, redis: clientB, redisKeyPrefix: prefix });
      expect((await hit(`${a.url}/PutObject/k`, 'x')).status).to.equal(200);
      expect((await hit(`${b.url}/PutObject/k`, 'y')).status).to.equal(200);
      for (const g of [a, b]) expect((await hit(`${g.url}/PutObject/k`, 'z')).status).to.equal(503);
    } finally {
      clientA.disconnect();
      clientB.disconnect();
    }
  });
});
