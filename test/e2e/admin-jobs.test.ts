import { DeleteObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { AdminJob } from '../../images/object-model/src/index.js';
import { productionSettings } from '../../images/service-kit/src/index.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';
import { OBJECT_STORE_SERVICES, startPlatform, type RunningPlatform } from '../../images/standalone/src/platform.js';
import { finishedJob } from '../support/admin-jobs.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { JWT_SECRET, ROOT_PASSWORD, ROOT_USER } from './support/platform.js';
import { bearer, login, newBucket, sdkClient } from './support/s3.js';

const DAY = 24 * 3600 * 1000;

/**
 * Long admin work is a job: `POST /admin/purge` answers 202 with the job at once, however long the
 * purge takes (here far past the gateway's control-plane breaker timeout, held up by a table lock),
 * `GET /admin/jobs/:id` tells how it went, and no breaker counts it.
 */
describe('e2e: the admin purge is a job (202, then its status)', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let dataDir: string;
  let platform: RunningPlatform;
  let s3: S3Client;
  let auth: Record<string, string>;

  before(async () => {
    db = await createTestDatabase('strata_jobs');
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-jobs-'));
    const rules = path.join(dataDir, 'gateway-rules.yaml');
    // A control-plane call cut after 3 s, and one counted failure opens the breaker. (Short enough for the
    // purge to outlast it; long enough that no ordinary call, such as the user and login of the second
    // test, exceeds it on a loaded machine and opens the breaker for everything after.)
    await writeFile(rules, 'breakers:\n  default: { timeout: 3000, errorThresholdPercentage: 1, resetTimeout: 60000, volumeThreshold: 1 }\n');
    platform = await startPlatform(
      {
        dataDir,
        host: '127.0.0.1',
        ports: { gateway: 0, dataPlane: 0, controlPlane: 0 },
        rootUser: ROOT_USER,
        rootPassword: ROOT_PASSWORD,
        jwtSecret: JWT_SECRET,
        purgeSchedule: false,
        gatewayRulesFile: rules,
        logLevel: process.env.STRATA_E2E_LOG_LEVEL ?? 'silent',
        production: productionSettings(loadStandaloneEnv({ STRATA_DATA_DIR: dataDir, STRATA_PG_URL: db.url })),
      },
      OBJECT_STORE_SERVICES,
    );
    s3 = sdkClient(platform.urls.gateway);
    auth = bearer(await login(platform.urls.gateway));
  });
  after(async () => {
    s3?.destroy();
    await platform?.stop();
    await db?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const gw = (p: string, init: RequestInit = {}) => fetch(`${platform.urls.gateway}${p}`, { ...init, headers: { ...auth, ...init.headers } });
  const startPurge = (now: Date) =>
    gw('/admin/purge', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ now: now.toISOString() }) });
  const jobOf = async (res: Response) => ((await res.json()) as { data: AdminJob }).data;

  it('answers 202 with a running job while the purge is held up, then the job succeeds; the breaker stays closed', async () => {
    const bucket = await newBucket(s3, 'jobs');
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'old.txt', Body: 'recycled long ago' }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'old.txt' }));

    // The purge cannot touch object rows while this lock is held (past the breaker's 3 s).
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    let job: AdminJob;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE object_info IN ACCESS EXCLUSIVE MODE');
      const started = await startPurge(new Date(Date.now() + 31 * DAY));
      expect(started.status, await started.clone().text()).to.equal(202);
      job = await jobOf(started.clone());
      expect(job).to.deep.include({ kind: 'purge', state: 'running' });
      expect(started.headers.get('location')).to.equal(`/admin/jobs/${job.id}`);
      // Past the breaker's timeout, still running; a second start answers the same job.
      await new Promise((resolve) => setTimeout(resolve, 3500));
      expect(await jobOf(await gw(`/admin/jobs/${job.id}`))).to.deep.include({ id: job.id, state: 'running' });
      expect((await jobOf(await startPurge(new Date(Date.now() + 31 * DAY)))).id).to.equal(job.id);
    } finally {
      await locker.query('COMMIT').catch(() => undefined);
      await locker.end();
    }
    const done = await finishedJob(answerOf(job), (id) => gw(`/admin/jobs/${id}`));
    expect(done).to.deep.include({ id: job.id, state: 'succeeded' });
    expect(done.result).to.deep.include({ purged: 1 });
    expect(done.finishedAt).to.be.a('string');

    const metrics = await (await fetch(`${platform.urls.gateway}/metrics`)).text();
    expect(metrics).to.match(/strata_gateway_breaker_state\{[^}]*upstream="control-plane"[^}]*\} 0/);
  });

  it('answers an unknown job 404 NoSuchJob, and jobs only to the root', async () => {
    const unknown = await gw('/admin/jobs/0190a8c4-0000-7000-8000-000000000000');
    expect(unknown.status).to.equal(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).to.equal('NoSuchJob');
    const user = `jobs${Date.now().toString(36)}`;
    expect(
      (
        await gw('/admin/users', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: user, password: 'a-password-1' }),
        })
      ).status,
    ).to.equal(201);
    const userAuth = bearer(await login(platform.urls.gateway, user, 'a-password-1'));
    expect((await fetch(`${platform.urls.gateway}/admin/purge`, { method: 'POST', headers: userAuth })).status).to.equal(403);
    expect((await fetch(`${platform.urls.gateway}/admin/jobs/anything`, { headers: userAuth })).status).to.equal(403);
  });
});

/** A 202 answer standing for `job` (finishedJob reads the job from it, then its status). */
function answerOf(job: AdminJob): Response {
  return new Response(JSON.stringify({ data: job }), { status: 202, headers: { 'content-type': 'application/json' } });
}
