import { expect } from 'chai';
import { rawRequest } from '../support/http.js';
import { startS3rver, type S3ServerHarness } from '../support/rgw.js';
import { startTcpProxy, type TcpFaultProxy } from '../support/tcp-proxy.js';
import { startTestPlatform, withEnv, type TestPlatform } from './support/platform.js';
import { bucketName, login, s3ErrorOf } from './support/s3.js';

/**
 * One bucket's S3-compatible backend accepts connections and never answers (a stalled TCP proxy in
 * front of a real S3 server): that bucket's requests fail with 503, every other bucket keeps answering,
 * and the hanging bucket is served again soon after its backend comes back.
 */
describe('e2e: a hanging storage backend denies only its own buckets', function () {
  this.timeout(120_000);
  let p: TestPlatform;
  let s3server: S3ServerHarness;
  let proxy: TcpFaultProxy;
  let auth: Record<string, string>;
  let restoreEnv = () => {};
  const hanging = bucketName('hang');
  const healthy = bucketName('fs');

  before(async () => {
    s3server = await startS3rver();
    proxy = await startTcpProxy({ port: Number(new URL(s3server.endpoint).port) });
    restoreEnv = withEnv({
      STRATA_BACKEND_MINIO_ENDPOINT: `http://127.0.0.1:${proxy.port}`,
      STRATA_BACKEND_MINIO_ACCESS_KEY: s3server.accessKey,
      STRATA_BACKEND_MINIO_SECRET_KEY: s3server.secretKey,
      STRATA_BACKEND_MINIO_BUCKET: bucketName('blobs'),
      // A backend silent for 1 s fails the call (default 5 s): keeps the test short.
      STRATA_BACKEND_MINIO_IDLE_TIMEOUT_MS: '1000',
    });
    p = await startTestPlatform();
    auth = { authorization: `Bearer ${await login(p.endpoint)}` };
    expect((await rawRequest(p.endpoint, 'PUT', `/${hanging}`, { ...auth, 'x-strata-backend': 'minio' })).status).to.equal(200);
    expect((await rawRequest(p.endpoint, 'PUT', `/${healthy}`, auth)).status).to.equal(200);
    expect((await rawRequest(p.endpoint, 'PUT', `/${hanging}/o.txt`, auth, 'on the backend')).status).to.equal(200);
    expect((await rawRequest(p.endpoint, 'PUT', `/${healthy}/o.txt`, auth, 'on the filesystem')).status).to.equal(200);
  });
  after(async () => {
    await p?.destroy();
    await proxy?.close();
    await s3server?.stop();
    restoreEnv();
  });

  it('GETs of the hanging bucket answer 503 ServiceUnavailable; the filesystem bucket keeps answering 200', async () => {
    proxy.stall();
    // Twice the gateway breaker's volume threshold of hanging reads, all at once, with the healthy bucket read alongside.
    const stuck = Array.from({ length: 24 }, () => rawRequest(p.endpoint, 'GET', `/${hanging}/o.txt?proxy=true`, auth));
    const healthyReads: number[] = [];
    let settled = false;
    const all = Promise.all(stuck).finally(() => {
      settled = true;
    });
    while (!settled) {
      const r = await rawRequest(p.endpoint, 'GET', `/${healthy}/o.txt?proxy=true`, auth);
      healthyReads.push(r.status);
      // (Few enough that the hanging reads would be most of the gateway breaker's window.)
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    for (const r of await all) {
      expect(r.status).to.equal(503);
      expect(s3ErrorOf(r.body).code).to.equal('ServiceUnavailable');
      // The data plane answered for its backend; the gateway did not give up on the data plane.
      expect(s3ErrorOf(r.body).message).to.match(/storage backend/);
    }
    expect(
      healthyReads.every((s) => s === 200),
      `healthy bucket answers: ${healthyReads.join(',')}`,
    ).to.equal(true);
    // And after them: the gateway's data-plane breaker stayed closed.
    for (let i = 0; i < 20; i++) {
      const r = await rawRequest(p.endpoint, 'GET', `/${healthy}/o.txt?proxy=true`, auth);
      expect(r.status).to.equal(200);
      expect(r.body).to.equal('on the filesystem');
    }
    const metrics = await (await fetch(`${p.endpoint}/metrics`)).text();
    expect(metrics).to.match(/strata_gateway_breaker_state\{[^}]*upstream="data-plane"[^}]*\} 0/);
    expect(metrics, 'the data-plane breaker never opened').not.to.match(
      /strata_gateway_breaker_transitions_total\{[^}]*upstream="data-plane"[^}]*to="open"[^}]*\} [1-9]/,
    );
  });

  it('the hanging bucket is served again once its backend answers', async () => {
    proxy.restore();
    for (;;) {
      const r = await rawRequest(p.endpoint, 'GET', `/${hanging}/o.txt?proxy=true`, auth);
      if (r.status === 200) {
        expect(r.body).to.equal('on the backend');
        return;
      }
      expect(r.status).to.equal(503);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
});
