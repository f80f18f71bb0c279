import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { startGateway } from '../../images/gateway/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { ROOT, startObjectLayer, TOKEN, type ObjectLayer } from '../data-plane/harness.js';

/**
 * A conditional GET or HEAD is decided from the object's metadata before its bytes are read: the
 * conditions travel with the read to the data plane, which answers 304 / 412 without opening the blob
 * (its bytes-out counter stays where it was).
 */
describe('gateway + data plane: conditional reads open no blob', function () {
  this.timeout(60_000);
  let layer: ObjectLayer;
  let gateway: RunningService;
  let auth: Record<string, string>;
  const body = randomBytes(256 * 1024);

  /** Object bytes the data plane has sent to readers so far. */
  const bytesOut = async () => {
    const text = await (await fetch(`${layer.dp.url}/metrics`)).text();
    return Number(/^strata_data_bytes_out_total(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1] ?? 0);
  };
  const get = (method: string, headers: Record<string, string> = {}) =>
    fetch(`${gateway.url}/reads/big.bin?proxy=true`, { method, headers: { ...auth, ...headers } });

  before(async () => {
    layer = await startObjectLayer('pglite', { inlineBlobBytes: 0 });
    gateway = await startGateway({
      port: 0,
      host: '127.0.0.1',
      controlPlaneUrl: layer.cp.url,
      dataPlaneUrl: layer.dp.url,
      internalToken: TOKEN,
      jwtSecret: 'test-jwt-secret-0123456789',
      rootUser: ROOT.user,
      logger: createLogger('test', 'silent'),
    });
    const login = await fetch(`${gateway.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: ROOT.user, password: ROOT.password }),
    });
    auth = { authorization: `Bearer ${((await login.json()) as { data: { token: string } }).data.token}` };
    expect((await fetch(`${gateway.url}/reads`, { method: 'PUT', headers: auth })).status).to.equal(200);
    expect((await fetch(`${gateway.url}/reads/big.bin`, { method: 'PUT', headers: auth, body })).status).to.equal(200);
  });
  after(async () => {
    await gateway?.stop(1000);
    await layer?.stop();
  });

  it('304 and 412 answers leave the data plane bytes-out counter unchanged; a served GET moves it by the object size', async () => {
    const head = await get('HEAD');
    const etag = head.headers.get('etag')!;
    const lastModified = head.headers.get('last-modified')!;
    const before = await bytesOut();
    const answers = [
      await get('GET', { 'if-none-match': etag }),
      await get('GET', { 'if-modified-since': new Date(Date.parse(lastModified) + 60_000).toUTCString() }),
      await get('GET', { 'if-match': '"00000000000000000000000000000000"' }),
      await get('GET', { 'if-unmodified-since': new Date(Date.parse(lastModified) - 60_000).toUTCString() }),
      await get('HEAD', { 'if-none-match': etag }),
    ];
    const statuses = [];
    for (const r of answers) {
      statuses.push(r.status);
      await r.arrayBuffer();
    }
    expect(statuses).to.deep.equal([304, 304, 412, 412, 304]);
    expect(answers[0]!.headers.get('etag')).to.equal(etag);
    expect(await bytesOut()).to.equal(before);
    const served = await get('GET', { 'if-match': etag });
    expect(Buffer.from(await served.arrayBuffer())).to.deep.equal(body);
    expect(await bytesOut()).to.equal(before + body.length);
  });
});
