import { expect } from 'chai';
import { startControlPlane } from '../../images/control-plane/src/app.js';
import { AdminJobs } from '../../images/control-plane/src/http/admin-jobs.js';
import { createLogger, createPgSqlClient, InMemoryCache, type RunningService, type SqlClient } from '../../images/service-kit/src/index.js';
import { finishedJob } from '../support/admin-jobs.js';
import { eventually } from '../support/eventually.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';

/**
 * Several control plane replicas behind one Service (STRATA_CONTROL_PLANE_REPLICAS): the purge CronJob
 * and the gateway start a job on one replica and read its status from whichever the Service picks.
 */
describe('admin jobs across control plane replicas', function () {
  this.timeout(60_000);
  const token = 'replicated-jobs-token';
  let db: TestDatabase;
  let sql: SqlClient;
  const replicas: RunningService[] = [];
  // The stack's Redis, shared by the replicas.
  const cache = new InMemoryCache();

  before(async () => {
    db = await createTestDatabase();
    sql = createPgSqlClient(db.url);
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await startControlPlane({
          port: 0,
          host: '127.0.0.1',
          internalToken: token,
          secretKey: 'replicated-jobs-secret',
          sql,
          cache,
          logger: createLogger('test', 'silent'),
        }),
      );
    }
  });
  after(async () => {
    for (const r of replicas) await r.stop(1000);
    await sql?.close();
    await db?.drop();
  });

  const call = (replica: RunningService, method: string, path: string, body?: unknown) =>
    fetch(`${replica.url}${path}`, {
      method,
      headers: { 'x-strata-internal-token': token, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it('a job started on one replica is answered by the other, running and finished', async () => {
    const [a, b] = replicas as [RunningService, RunningService];
    const started = await call(a, 'POST', '/internal/purge', {});
    const job = await finishedJob(started, (id) => call(b, 'GET', `/internal/jobs/${id}`));
    expect(job.state, JSON.stringify(job.error)).to.equal('succeeded');
    expect(job.kind).to.equal('purge');
    expect(job.result).to.include({ purged: 0 });
    // And the replica that ran it answers the same.
    expect(await (await call(a, 'GET', `/internal/jobs/${job.id}`)).json()).to.deep.equal(job);
  });

  it('an id no replica knows is still NoSuchJob', async () => {
    const res = await call(replicas[1]!, 'GET', '/internal/jobs/00000000-0000-4000-8000-000000000000');
    expect(res.status).to.equal(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).to.equal('NoSuchJob');
  });
});

describe('one admin job of a kind across control plane replicas', () => {
  it('a replica asked for a kind another replica runs answers that job and runs nothing; once it finished, a new one starts', async () => {
    const cache = new InMemoryCache();
    const logger = createLogger('test', 'silent');
    const [a, b] = [new AdminJobs(() => new Date(), logger, cache), new AdminJobs(() => new Date(), logger, cache)];
    let finish!: () => void;
    const running = await a.start('purge', () => new Promise<void>((resolve) => (finish = resolve)));
    let ranOnB = 0;
    const onB = await b.start('purge', async () => void ranOnB++);
    expect(onB.id).to.equal(running.id);
    expect(onB.state).to.equal('running');
    expect(ranOnB).to.equal(0);
    finish();
    await eventually(async () => expect((await b.get(running.id)).state).to.equal('succeeded'), 'the job finished');
    const next = await b.start('purge', async () => void ranOnB++);
    expect(next.id).to.not.equal(running.id);
    await eventually(() => expect(ranOnB).to.equal(1), 'a new job ran on b');
  });

  it('a cache outage does not stop a job: it runs, and this replica answers its status', async () => {
    const down = new Error('cache unreachable');
    const unreachable = { get: () => Promise.reject(down), set: () => Promise.reject(down), del: () => Promise.reject(down) };
    const jobs = new AdminJobs(() => new Date(), createLogger('test', 'silent'), unreachable);
    let ran = 0;
    const job = await jobs.start('purge', async () => void ran++);
    await eventually(async () => expect((await jobs.get(job.id)).state).to.equal('succeeded'), 'the job finished');
    expect(ran).to.equal(1);
  });
});
