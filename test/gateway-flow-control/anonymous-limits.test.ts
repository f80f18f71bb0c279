import { expect } from 'chai';
import { parseFlowRules } from '../../images/gateway/src/flow-control/index.js';
import { addressKey } from '../../images/gateway/src/flow-control/rate-limits.js';
import { DEFAULT_ANONYMOUS_RATE } from '../../images/gateway/src/flow-control/rules.js';
import { trustedProxies } from '../../images/service-kit/src/trusted-proxies.js';
import { metricValue, startTestGateway, type TestGateway } from './support.js';

/** An anonymous request (no x-user) as forwarded for `client` (X-Forwarded-For), or as a user's. */
async function request(g: TestGateway, client: string, user?: string): Promise<{ status: number; retryAfter: string | null }> {
  const res = await fetch(`${g.url}/GetObject/public.txt`, { headers: { 'x-forwarded-for': client, ...(user ? { 'x-user': user } : {}) } });
  await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after') };
}

/**
 * Anonymous reads of public objects are limited per client address (the one trusted proxies forward, never
 * one a client claims), so that reads nobody signs are no free flood; signed callers keep their own limits.
 */
describe('gateway flow control: the anonymous rate limit per client address', function () {
  this.timeout(60_000);
  const gateways: TestGateway[] = [];
  const start = async (trust: string) => {
    const g = await startTestGateway({
      rules: parseFlowRules('rateLimits: { anonymous: { points: 2, duration: 60 } }'),
      clientAddressOf: trustedProxies(trust).clientAddress,
    });
    gateways.push(g);
    return g;
  };
  afterEach(async () => {
    for (const g of gateways.splice(0)) await g.stop();
  });

  it('is on by default, and can be turned off with false', () => {
    expect(parseFlowRules('{}').rateLimits.anonymous).to.deep.equal(DEFAULT_ANONYMOUS_RATE);
    expect(parseFlowRules('rateLimits: { routes: {} }').rateLimits.anonymous).to.deep.equal(DEFAULT_ANONYMOUS_RATE);
    expect(parseFlowRules('rateLimits: { anonymous: false }').rateLimits.anonymous).to.equal(false);
  });

  it('behind a trusted proxy: each forwarded address has its own limit, SlowDown with Retry-After past it; signed callers are not counted', async () => {
    const g = await start('loopback');
    expect((await request(g, '203.0.113.5')).status).to.equal(200);
    expect((await request(g, '203.0.113.5')).status).to.equal(200);
    const refused = await request(g, '203.0.113.5');
    expect(refused.status).to.equal(503);
    expect(Number(refused.retryAfter)).to.be.greaterThan(0);
    expect((await request(g, '203.0.113.6')).status).to.equal(200);
    // A signed caller from the same address has its own (user) limits, not the address's.
    expect((await request(g, '203.0.113.5', 'alice')).status).to.equal(200);
    expect(g.served.get('GetObject')).to.equal(4);
    expect(
      await metricValue(g.registry, 'strata_gateway_rate_limit_rejections_total', { route: 'GetObject', user_class: 'anonymous', scope: 'address' }),
    ).to.equal(1);
  });

  it('without trusted proxies a client cannot escape by claiming other addresses: all count as the peer', async () => {
    const g = await start('');
    expect((await request(g, '198.51.100.1')).status).to.equal(200);
    expect((await request(g, '198.51.100.2')).status).to.equal(200);
    expect((await request(g, '198.51.100.3')).status).to.equal(503);
  });

  it('counts IPv6 clients by /64, IPv4-mapped addresses as IPv4', async () => {
    const g = await start('loopback');
    expect((await request(g, '2001:db8:1:2::1')).status).to.equal(200);
    expect((await request(g, '2001:db8:1:2:ffff:ffff:ffff:9')).status).to.equal(200);
    expect((await request(g, '2001:db8:1:2:0:0:0:77')).status).to.equal(503);
    expect((await request(g, '2001:db8:1:3::1')).status).to.equal(200);
    expect([addressKey('::ffff:192.0.2.7'), addressKey('192.0.2.7'), addressKey('2001:DB8:0001:0002::5'), addressKey('fe80::1%eth0')]).to.deep.equal([
      '192.0.2.7',
      '192.0.2.7',
      '2001:db8:1:2::/64',
      'fe80:0:0:0::/64',
    ]);
  });
});
