import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from '../../images/service-kit/src/index.js';
import { ControlPlaneClient } from '../../images/gateway/src/clients/control-plane.js';
import { Breakers } from '../../images/gateway/src/flow-control/breakers.js';
import { flowMetrics } from '../../images/gateway/src/flow-control/metrics.js';
import { parseFlowRules } from '../../images/gateway/src/flow-control/index.js';
import { capturingLogger } from './support.js';

/**
 * A control plane whose answers for one bucket (and one account's listings) are server faults, as a
 * listing of a huge bucket that times out would be: the gateway's breakers for the control plane must
 * open for that bucket or account only, never for the others or for credential lookups.
 */
describe('gateway flow control: control-plane calls are guarded per bucket and per account', function () {
  this.timeout(30_000);
  let server: http.Server;
  let url: string;
  let breakers: Breakers;
  let client: ControlPlaneClient;

  before(async () => {
    server = http.createServer((req, res) => {
      const broken = req.url!.includes('/broken-bucket') || req.url!.includes('/users/mallory/');
      res.writeHead(broken ? 500 : 200, { 'content-type': 'application/json' });
      if (broken) res.end(JSON.stringify({ error: { code: 'InternalError', message: 'a fault of the control plane' } }));
      else if (req.url!.startsWith('/internal/credentials/')) res.end(JSON.stringify({ username: 'alice', accessKey: 'alice-key', secretKey: 'secret' }));
      else if (req.url!.includes('/buckets') && req.url!.startsWith('/internal/users/')) res.end(JSON.stringify({ buckets: [] }));
      else res.end(JSON.stringify({ name: 'healthy-bucket', owner: 'alice', createdAt: '2026-01-01T00:00:00.000Z', backend: { kind: 'fs' } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    breakers = new Breakers(
      parseFlowRules('breakers: { default: { timeout: 5000, errorThresholdPercentage: 50, resetTimeout: 60000, volumeThreshold: 3 } }'),
      flowMetrics(new Registry()),
      capturingLogger().logger,
    );
    // As the gateway wires it (app.ts).
    client = new ControlPlaneClient(url, 'token', (fn, scope) => breakers.run('control-plane', fn, scope));
  });
  afterEach(() => breakers.close());

  const settle = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (err: unknown) => err,
    );

  it('failures for one bucket open its breaker only: other buckets, accounts and credential lookups go on', async () => {
    for (let i = 0; i < 5; i++) await settle(client.listObjects('broken-bucket', {}));
    expect(breakers.state('control-plane', 'broken-bucket')).to.equal('open');
    expect(breakers.state('control-plane')).to.equal('closed');
    expect((await client.getBucket('healthy-bucket')).name).to.equal('healthy-bucket');
    expect(await client.listBuckets('alice')).to.deep.equal([]);
    expect((await client.credentials('AKALICE')).username).to.equal('alice');
    // The broken bucket is refused at once (its circuit is open), with S3's ServiceUnavailable.
    expect(((await settle(client.getBucket('broken-bucket'))) as { code?: string }).code).to.equal('ServiceUnavailable');
  });

  it('failures of one account’s listings open that account’s breaker only', async () => {
    for (let i = 0; i < 5; i++) await settle(client.listBuckets('mallory'));
    expect(breakers.state('control-plane', 'account:mallory')).to.equal('open');
    expect(breakers.state('control-plane')).to.equal('closed');
    expect(await client.listBuckets('alice')).to.deep.equal([]);
    expect((await client.getBucket('healthy-bucket')).name).to.equal('healthy-bucket');
  });
});
