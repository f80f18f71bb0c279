import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { z } from 'zod';
import { Registry } from '../../images/service-kit/src/index.js';
import { S3Error } from '../../images/object-model/src/index.js';
import { InternalHttp } from '../../images/gateway/src/clients/internal-http.js';
import { ClientGone } from '../../images/gateway/src/context.js';
import { Breakers, upstreamFailure } from '../../images/gateway/src/flow-control/breakers.js';
import { flowMetrics } from '../../images/gateway/src/flow-control/metrics.js';
import { parseFlowRules } from '../../images/gateway/src/flow-control/index.js';
import { FairPool } from '../../images/service-kit/src/fair-pool.js';
import { capturingLogger, metricValue } from './support.js';

const failing = () => Promise.reject(upstreamFailure(new S3Error('ServiceUnavailable', 'unreachable')));
const settle = (p: Promise<unknown>) =>
  p.then(
    (v) => v,
    (e: unknown) => e,
  );

describe('gateway flow control: fair shares of the shared pools', function () {
  this.timeout(30_000);

  it('caps each tenant, and a tenant over its share takes no more while another wants slots', () => {
    const pool = new FairPool(8, 6);
    const now = 1_000_000;
    const hog: Array<() => void> = [];
    // Alone, a tenant takes up to its own cap...
    for (let i = 0; i < 6; i++) hog.push(pool.tryTake('hog', now) as () => void);
    expect(pool.tryTake('hog', now)).to.equal('tenant-cap');
    // ...and a second one gets slots at once: its share (8 / 2) is still free.
    const other = [pool.tryTake('other', now), pool.tryTake('other', now)];
    for (const r of other) expect(r).to.be.a('function');
    expect(pool.inUse()).to.equal(8);
    expect(pool.tryTake('other', now)).to.equal('pool-full');
    // A slot the hog frees goes to the tenant below its share, never back to the hog (6 > 8 / 2).
    hog.pop()!();
    expect(pool.tryTake('hog', now)).to.equal('share');
    expect(pool.tryTake('other', now)).to.be.a('function');
    // Many hogs: each newcomer is still admitted while it holds less than its share.
    const big = new FairPool(12, 100);
    for (const t of ['a', 'b', 'c']) for (let i = 0; i < 3; i++) expect(big.tryTake(t, now)).to.be.a('function');
    expect(big.tryTake('newcomer', now)).to.be.a('function');
    // With four tenants holding slots each one's share is 12 / 4: the first three are at theirs.
    expect(big.tryTake('a', now)).to.equal('share');
    expect(big.tryTake('newcomer', now)).to.be.a('function');
  });

  it('keeps one breaker per scope (bucket): failures for one bucket never deny another', async () => {
    const registry = new Registry();
    const breakers = new Breakers(
      parseFlowRules('breakers: { default: { timeout: 1000, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 3 } }'),
      flowMetrics(registry),
      capturingLogger().logger,
    );
    try {
      for (let i = 0; i < 5; i++) await settle(breakers.run('data-plane', failing, 'broken-bucket'));
      expect(breakers.state('data-plane', 'broken-bucket')).to.equal('open');
      expect(await breakers.run('data-plane', () => Promise.resolve('ok'), 'healthy-bucket')).to.equal('ok');
      expect(await breakers.run('data-plane', () => Promise.resolve('ok'))).to.equal('ok');
      expect(breakers.state('data-plane')).to.equal('closed');
      const denied = (await settle(breakers.run('data-plane', () => Promise.resolve('ok'), 'broken-bucket'))) as S3Error;
      expect(denied.code).to.equal('ServiceUnavailable');
      // The upstream's gauge shows its worst breaker (metrics never name a bucket).
      expect(await metricValue(registry, 'strata_gateway_breaker_state', { upstream: 'data-plane' })).to.equal(2);
    } finally {
      breakers.close();
    }
  });

  it('does not count calls the client ended by going away (AbortError)', async () => {
    const breakers = new Breakers(
      parseFlowRules('breakers: { default: { timeout: 1000, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 3 } }'),
      flowMetrics(new Registry()),
      capturingLogger().logger,
    );
    try {
      const aborted = () => Promise.reject(Object.assign(new Error('The operation was aborted'), { name: 'AbortError' }));
      for (let i = 0; i < 10; i++) await settle(breakers.run('data-plane', aborted));
      expect(breakers.state('data-plane')).to.equal('closed');
    } finally {
      breakers.close();
    }
  });

  describe('waiting for an internal connection', () => {
    let server: http.Server;
    let base: string;
    const held: http.ServerResponse[] = [];
    before(async () => {
      server = http.createServer((req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        if (req.url === '/hold') {
          // Headers now, the body when the test says: the call holds its connection meanwhile.
          res.write('x');
          held.push(res);
        } else res.end('{}');
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    it('is queueing: a call that waits past the breaker timeout for a connection succeeds and is not counted', async () => {
      const breakers = new Breakers(
        parseFlowRules('breakers: { default: { timeout: 300, errorThresholdPercentage: 1, resetTimeout: 60000, volumeThreshold: 1 } }'),
        flowMetrics(new Registry()),
        capturingLogger().logger,
      );
      const client = new InternalHttp(base, 'token', 'test upstream', (fn, scope) => breakers.run('data-plane', fn, scope), 0, 2);
      try {
        // Both connections held by answers nobody reads (slow readers downstream).
        const streams = [await client.stream({ method: 'GET', path: '/hold' }), await client.stream({ method: 'GET', path: '/hold' })];
        const waiting = client.json('GET', '/quick', z.unknown());
        const gone = new ClientGone();
        const cancelled = settle(client.stream({ method: 'GET', path: '/quick', cancellation: gone }));
        await new Promise((r) => setTimeout(r, 600)); // twice the breaker's timeout
        gone.fire();
        expect(((await cancelled) as Error).name).to.equal('AbortError');
        held.shift()!.end();
        streams[0]!.resume();
        expect(await waiting).to.deep.equal({});
        expect(breakers.state('data-plane')).to.equal('closed');
        held.shift()!.end();
        streams[1]!.resume();
      } finally {
        client.close();
        breakers.close();
      }
    });
  });
});
