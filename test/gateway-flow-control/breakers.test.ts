import { expect } from 'chai';
import { Registry } from '../../images/service-kit/src/index.js';
import { S3Error } from '../../images/object-model/src/index.js';
import { Breakers, upstreamFailure } from '../../images/gateway/src/flow-control/breakers.js';
import { flowMetrics } from '../../images/gateway/src/flow-control/metrics.js';
import { parseFlowRules } from '../../images/gateway/src/flow-control/index.js';
import { DEFAULT_BREAKER, emptyFlowRules } from '../../images/gateway/src/flow-control/rules.js';
import { capturingLogger, eventually, metricValue } from './support.js';

describe('gateway flow control: circuit breakers', function () {
  this.timeout(30_000);
  let breakers: Breakers;
  let registry: Registry;
  afterEach(() => breakers?.close());

  const setup = (yaml: string) => {
    registry = new Registry();
    breakers = new Breakers(parseFlowRules(yaml), flowMetrics(registry), capturingLogger().logger);
  };

  const outcome = async (p: Promise<unknown>): Promise<unknown> => {
    try {
      return await p;
    } catch (err) {
      return err;
    }
  };

  it('opens after failures, rejects fast without calling the upstream, half-opens and closes again', async () => {
    setup(`
breakers:
  upstreams:
    data-plane: { timeout: 5000, errorThresholdPercentage: 50, resetTimeout: 300, volumeThreshold: 3 }
`);
    let healthy = false;
    let calls = 0;
    const upstream = breakers.wrap('data-plane', async (key: string) => {
      calls++;
      if (!healthy) throw new Error(`connect ECONNREFUSED for ${key}`);
      return `bytes of ${key}`;
    });
    for (let i = 0; i < 3; i++) expect(((await outcome(upstream('a'))) as Error).message).to.match(/ECONNREFUSED/);
    expect(breakers.state('data-plane')).to.equal('open');
    expect(await metricValue(registry, 'strata_gateway_breaker_state', { upstream: 'data-plane' })).to.equal(2);

    const callsWhenOpened = calls;
    const rejected = await outcome(upstream('b'));
    expect(rejected).to.be.instanceOf(S3Error);
    expect((rejected as S3Error).code).to.equal('ServiceUnavailable');
    expect((rejected as S3Error).status).to.equal(503);
    expect(calls).to.equal(callsWhenOpened);

    await eventually(() => breakers.state('data-plane') === 'halfOpen', 'half-open after resetTimeout');
    expect(await metricValue(registry, 'strata_gateway_breaker_state', { upstream: 'data-plane' })).to.equal(1);
    healthy = true;
    expect(await upstream('c')).to.equal('bytes of c');
    expect(breakers.state('data-plane')).to.equal('closed');
    expect(await metricValue(registry, 'strata_gateway_breaker_state', { upstream: 'data-plane' })).to.equal(0);
    for (const to of ['open', 'halfOpen', 'closed']) {
      expect(await metricValue(registry, 'strata_gateway_breaker_transitions_total', { upstream: 'data-plane', to }), to).to.equal(1);
    }
  });

  it("does not count the caller's errors (S3 4xx) against the upstream", async () => {
    setup('breakers: { default: { timeout: 5000, errorThresholdPercentage: 10, resetTimeout: 60000, volumeThreshold: 1 } }');
    const upstream = breakers.wrap('control-plane', async () => {
      throw new S3Error('NoSuchKey');
    });
    for (let i = 0; i < 5; i++) expect(((await outcome(upstream())) as S3Error).code).to.equal('NoSuchKey');
    expect(breakers.state('control-plane')).to.equal('closed');
  });

  it("counts only the upstream's own failures: not the 503s it answers by design, nor a storage backend it reports down", async () => {
    setup('breakers: { default: { timeout: 5000, errorThresholdPercentage: 10, resetTimeout: 60000, volumeThreshold: 1 } }');
    const answers = [
      new S3Error('SlowDown'),
      new S3Error('ServiceUnavailable', 'the multipart store is unavailable'),
      new S3Error('ServiceUnavailable', 'backend down', { StorageBackend: 'minio' }),
      new S3Error('NotImplemented'),
      new S3Error('InvalidArgument'),
    ];
    const upstream = breakers.wrap('data-plane', async (err: S3Error) => {
      throw err;
    });
    for (let i = 0; i < 4; i++) for (const err of answers) expect(await outcome(upstream(err))).to.equal(err);
    expect(breakers.state('data-plane')).to.equal('closed');
    // The upstream could not be reached (the client marks it), or it failed with a server fault of its own: those count.
    const unreachable = breakers.wrap('control-plane', async () => {
      throw upstreamFailure(new S3Error('ServiceUnavailable', 'control plane is unreachable: connect ECONNREFUSED'));
    });
    await outcome(unreachable());
    expect(breakers.state('control-plane')).to.equal('open');
    const faulty = breakers.wrap('other', async () => {
      throw new S3Error('InternalError');
    });
    await outcome(faulty());
    expect(breakers.state('other')).to.equal('open');
  });

  it("by default gives service back within 2 s of the upstream's recovery (half-open probe)", async () => {
    expect(DEFAULT_BREAKER.resetTimeout).to.be.at.most(2000);
    breakers = new Breakers(emptyFlowRules(), flowMetrics((registry = new Registry())), capturingLogger().logger);
    let healthy = false;
    const upstream = breakers.wrap('control-plane', async () => {
      if (!healthy) throw new Error('connect ECONNREFUSED');
      return 'ok';
    });
    while (breakers.state('control-plane') !== 'open') await outcome(upstream());
    healthy = true;
    // The first probe after resetTimeout closes it again.
    await eventually(() => breakers.state('control-plane') === 'halfOpen', 'half-open after the default resetTimeout');
    expect(await upstream()).to.equal('ok');
    expect(breakers.state('control-plane')).to.equal('closed');
  });

  it('turns a slow upstream into ServiceUnavailable at the timeout', async () => {
    setup('breakers: { upstreams: { slow: { timeout: 50, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 100 } } }');
    let finish: () => void = () => undefined;
    const upstream = breakers.wrap('slow', () => new Promise<string>((resolve) => (finish = () => resolve('late'))));
    const err = await outcome(upstream());
    finish();
    expect(err).to.be.instanceOf(S3Error);
    expect((err as S3Error).code).to.equal('ServiceUnavailable');
    expect((err as S3Error).message).to.match(/in time/);
  });

  it('has no timeout where the rules say 0 (streamed uploads), and run() types generic calls', async () => {
    setup('breakers: { upstreams: { upload: { timeout: 0, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 100 } } }');
    const slow = breakers.run('upload', () => new Promise<number>((resolve) => setTimeout(() => resolve(42), 100)));
    expect(await slow).to.equal(42);
  });

  it('shares one breaker among the functions wrapped under one name, not across names', async () => {
    setup('breakers: { default: { timeout: 5000, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 2 } }');
    const failing = breakers.wrap('data-plane', async () => {
      throw new Error('down');
    });
    const other = breakers.wrap('data-plane', async () => 'fine');
    const elsewhere = breakers.wrap('control-plane', async () => 'fine');
    for (let i = 0; i < 3; i++) await outcome(failing());
    expect(breakers.state('data-plane')).to.equal('open');
    expect(((await outcome(other())) as S3Error).code).to.equal('ServiceUnavailable');
    expect(await elsewhere()).to.equal('fine');
  });

  it('applies new settings on reload (a changed breaker starts closed)', async () => {
    setup('breakers: { default: { timeout: 5000, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 2 } }');
    const failing = breakers.wrap('data-plane', async () => {
      throw new Error('down');
    });
    for (let i = 0; i < 3; i++) await outcome(failing());
    expect(breakers.state('data-plane')).to.equal('open');
    breakers.update(parseFlowRules('breakers: { default: { timeout: 5000, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 50 } }'));
    expect(breakers.state('data-plane')).to.equal('closed');
    for (let i = 0; i < 5; i++) expect(((await outcome(failing())) as Error).message).to.equal('down');
    expect(breakers.state('data-plane')).to.equal('closed');
  });
});
