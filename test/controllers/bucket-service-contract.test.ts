import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { TEST_CREDENTIALS, TEST_SETTINGS, type Doc } from './support/harness.js';
import { startControlPlane } from '../../images/control-plane/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { BucketConflictError, HttpBucketService, corsRuleBody, lifecycleRuleBody } from '../../controllers/bucket/bucket-service.js';

const TOKEN = 'operator-contract-internal-token';

/**
 * The Bucket controller's client against the real control plane (on a throw-away database of the
 * local PostgreSQL, as in production; an embedded PGlite took most of this suite's time to start): the
 * paths, bodies, error codes and statistics it relies on are the ones the control plane serves.
 */
describe('Bucket controller client against the real control plane', function () {
  this.timeout(60_000);
  let cp: RunningService;
  let db: TestDatabase | undefined;
  /** Stands in for the data plane, which the control plane asks whether a backend is usable. */
  let dataPlane: http.Server;
  const backendChecks: unknown[] = [];
  const client = (rootUser: string) => new HttpBucketService({ namespace: 'ns', controlPlaneUrl: cp.url, rootUser, internalToken: TOKEN });

  before(async () => {
    dataPlane = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (req.url === '/internal/backends/check') backendChecks.push(JSON.parse(body));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => dataPlane.listen(0, '127.0.0.1', resolve));
    db = await createTestDatabase('strata_contract');
    cp = await startControlPlane({
      pgUrl: db.url,
      dataPlaneUrl: `http://127.0.0.1:${(dataPlane.address() as AddressInfo).port}`,
      port: 0,
      host: '127.0.0.1',
      internalToken: TOKEN,
      secretKey: 'operator-contract-secret-key',
      rootUser: 'strata-root',
      rootPassword: 'operator-contract-root-password',
      logger: createLogger('test', 'silent'),
    });
  });
  after(async () => {
    await cp?.stop(1000);
    await db?.drop();
    dataPlane?.closeAllConnections();
    await new Promise((resolve) => dataPlane?.close(resolve));
  });

  it('creates a bucket once, reports its statistics and deletes it', async () => {
    const root = client('strata-root');
    expect(await root.ensureBucket('photos', { kind: 'fs' })).to.equal('created');
    expect(await root.ensureBucket('photos', { kind: 'fs' })).to.equal('exists');
    expect(await root.stats('photos')).to.deep.equal({ objectCount: 0, bytes: 0 });
    expect(await root.deleteBucket('photos')).to.deep.equal({ gone: true });
    expect(await root.deleteBucket('photos')).to.deep.equal({ gone: true }); // gone already: fine
    expect(await root.ensureBucket('photos', { kind: 'fs' })).to.equal('created');
  });

  it('stores an operator-made S3 backend with its settings', async () => {
    const backend = {
      kind: 'minio' as const,
      endpoint: 'http://minio:9000',
      region: 'eu-west-1',
      bucket: 'strata-remote',
      useSSL: false,
      pathStyle: true,
      accessKey: 'AKID',
      secretKey: 'SECRET',
    };
    expect(await client('strata-root').ensureBucket('remote', backend)).to.equal('created');
    const stored = (await (await fetch(`${cp.url}/internal/buckets/remote`, { headers: { 'x-strata-internal-token': TOKEN } })).json()) as { backend: object };
    expect(stored.backend).to.deep.include({ kind: 'minio', endpoint: 'http://minio:9000', bucket: 'strata-remote' });
  });

  it("makes a bucket's lifecycle and CORS rules what the spec says, writing only when they differ", async () => {
    const root = client('strata-root');
    expect(await root.ensureBucket('aged', { kind: 'fs' })).to.equal('created');
    const rules = [
      lifecycleRuleBody({ id: 'logs', enabled: true, prefix: 'logs/', expirationDays: 30 }),
      lifecycleRuleBody({ id: 'cutover', enabled: true, prefix: 'tmp/', expirationDate: '2031-06-01', abortIncompleteMultipartUploadDays: 3 }),
    ];
    expect(await root.ensureConfig('aged', 'lifecycle', rules)).to.equal('updated');
    expect(await root.ensureConfig('aged', 'lifecycle', rules)).to.equal('unchanged');
    const stored = await fetch(`${cp.url}/internal/buckets/aged/lifecycle`, { headers: { 'x-strata-internal-token': TOKEN } });
    expect(await stored.json()).to.deep.equal({ rules });
    expect(await root.ensureConfig('aged', 'lifecycle', rules.slice(0, 1))).to.equal('updated');
    expect(await root.ensureConfig('aged', 'lifecycle', [])).to.equal('updated');
    expect((await fetch(`${cp.url}/internal/buckets/aged/lifecycle`, { headers: { 'x-strata-internal-token': TOKEN } })).status).to.equal(404);
    expect(await root.ensureConfig('aged', 'lifecycle', [])).to.equal('unchanged');

    const cors = [
      corsRuleBody({
        allowedOrigins: ['https://app.example'],
        allowedMethods: ['GET', 'PUT'],
        allowedHeaders: ['content-type'],
        exposeHeaders: ['ETag'],
        maxAgeSeconds: 600,
      }),
    ];
    expect(await root.ensureConfig('aged', 'cors', cors)).to.equal('updated');
    expect(await root.ensureConfig('aged', 'cors', cors)).to.equal('unchanged');
    expect(await (await fetch(`${cp.url}/internal/buckets/aged/cors`, { headers: { 'x-strata-internal-token': TOKEN } })).json()).to.deep.equal({
      rules: cors,
    });
    expect(await root.ensureConfig('aged', 'cors', [])).to.equal('updated');
    expect(await root.ensureConfig('aged', 'cors', [])).to.equal('unchanged');
  });

  /** Runs the purge CronJob's command against the control plane at `url`: its exit code and output. */
  const runPurgeCommand = (url: string, token: string) => {
    const cron = renderStorageStack('ns', [], TEST_SETTINGS, TEST_CREDENTIALS).find((o) => o.kind === 'CronJob') as Doc;
    const [command, ...args] = cron.spec.jobTemplate.spec.template.spec.containers[0].command as string[];
    expect(command).to.equal('node');
    // Polled every 20 ms instead of the CronJob's 2 s: the test waits for the job, not for a clock.
    const env = { PATH: process.env.PATH, STRATA_CONTROL_PLANE_URL: url, STRATA_INTERNAL_TOKEN: token, PURGE_POLL_MS: '20' };
    return promisify(execFile)(process.execPath, args, { env }).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (err: { code?: number; stdout?: string }) => ({ code: err.code ?? 1, stdout: err.stdout ?? '' }),
    );
  };

  it("runs the purge CronJob's command against the control plane: it waits for the purge job (and fails on a bad token)", async () => {
    const ok = await runPurgeCommand(cp.url, TOKEN);
    expect(ok.code, ok.stdout).to.equal(0);
    expect(ok.stdout).to.match(/^succeeded /);
    const job = JSON.parse(ok.stdout.slice('succeeded '.length)) as { kind: string; state: string; result: { purged: number } };
    expect(job).to.deep.include({ kind: 'purge', state: 'succeeded' });
    expect(job.result.purged).to.equal(0);
    expect((await runPurgeCommand(cp.url, 'wrong-token-wrong-token')).code).to.equal(1);
  });

  it("fails the purge CronJob's command when the job fails or the control plane forgot it", async () => {
    // A control plane whose purge job fails after a while, or is unknown when asked (a restart).
    let outcome: 'failed' | 'forgotten' = 'failed';
    let polls = 0;
    const stub = http.createServer((req, res) => {
      const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.method === 'POST' && req.url === '/internal/purge')
        return json(202, { id: 'j1', kind: 'purge', state: 'running', startedAt: new Date().toISOString() });
      if (req.url !== '/internal/jobs/j1') return json(404, { error: { code: 'InvalidRequest', message: 'no such route' } });
      if (outcome === 'forgotten') return json(404, { error: { code: 'NoSuchJob', message: 'The specified job does not exist' } });
      if (++polls < 2) return json(200, { id: 'j1', kind: 'purge', state: 'running', startedAt: new Date().toISOString() });
      return json(200, { id: 'j1', kind: 'purge', state: 'failed', error: { code: 'ServiceUnavailable', message: 'database unavailable' } });
    });
    await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
      const failed = await runPurgeCommand(url, TOKEN);
      expect(failed.code, failed.stdout).to.equal(1);
      expect(failed.stdout).to.match(/^failed /);
      expect(polls).to.equal(2); // it waited while the job ran
      outcome = 'forgotten';
      expect((await runPurgeCommand(url, TOKEN)).code).to.equal(1);
    } finally {
      stub.closeAllConnections();
      await new Promise((resolve) => stub.close(resolve));
    }
  });

  it('reports a name taken by another owner, or refused, as a conflict', async () => {
    await client('strata-root').ensureBucket('shared', { kind: 'fs' });
    const taken = await client('someone-else')
      .ensureBucket('shared', { kind: 'fs' })
      .catch((err: unknown) => err);
    expect(taken).to.be.instanceOf(BucketConflictError);
    expect((taken as Error).message).to.match(/BucketAlreadyExists/);
    const invalid = await client('strata-root')
      .ensureBucket('Not_A_Bucket', { kind: 'fs' })
      .catch((err: unknown) => err);
    expect(invalid).to.be.instanceOf(BucketConflictError);
    expect((invalid as Error).message).to.match(/InvalidBucketName/);
  });
});
