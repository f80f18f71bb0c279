import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane } from '../../images/control-plane/src/app.js';
import { BackendRegistry } from '../../images/data-plane/src/backends/registry.js';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { FS_BACKEND_OFF, S3Error } from '../../images/object-model/src/index.js';
import { createLogger, createPgSqlClient, type RunningService, type SqlClient } from '../../images/service-kit/src/index.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';

/**
 * STRATA_FS_BACKEND=false (the operator's replicated data planes, which share no volume): no bucket
 * keeps bytes on a data plane's scratch space; both planes refuse fs buckets.
 */
describe('fs backend turned off (replicated data planes)', function () {
  this.timeout(60_000);
  const token = 'fs-off-token';
  let db: TestDatabase;
  let sql: SqlClient;
  const planes: RunningService[] = [];

  before(async () => {
    db = await createTestDatabase();
    sql = createPgSqlClient(db.url);
  });
  after(async () => {
    for (const p of planes) await p.stop(1000);
    await sql?.close();
    await db?.drop();
  });

  const start = async (fsBackend?: boolean) => {
    const cp = await startControlPlane({
      port: 0,
      host: '127.0.0.1',
      internalToken: token,
      secretKey: 'fs-off-secret',
      sql,
      fsBackend,
      logger: createLogger('test', 'silent'),
    });
    planes.push(cp);
    return (name: string, backend?: object) =>
      fetch(`${cp.url}/internal/buckets/${name}`, {
        method: 'PUT',
        headers: { 'x-strata-internal-token': token, 'content-type': 'application/json' },
        body: JSON.stringify({ owner: 'alice', ...(backend ? { backend } : {}) }),
      });
  };

  it('the control plane refuses to create an fs bucket (named or by default), and creates one when fs is on', async () => {
    const off = await start(false);
    for (const backend of [undefined, { kind: 'fs' }]) {
      const res = await off('fs-off', backend);
      expect(res.status, JSON.stringify(backend)).to.equal(400);
      expect(((await res.json()) as { error: { code: string; message: string } }).error).to.deep.include({ code: 'InvalidArgument', message: FS_BACKEND_OFF });
    }
    expect((await sql.query("SELECT 1 FROM buckets WHERE name = 'fs-off'")).rows).to.have.length(0);
    const on = await start();
    expect((await on('fs-on')).status).to.equal(200);
  });

  it('the data plane serves no fs bucket (reads, writes and backend checks alike)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'strata-fs-off-'));
    try {
      const off = new BackendRegistry(new FsBackend(dir), {}, undefined, undefined, false);
      expect(() => off.forBucket({ kind: 'fs' }))
        .to.throw(S3Error, FS_BACKEND_OFF)
        .with.property('code', 'InvalidArgument');
      let checked: unknown;
      await off.check({ kind: 'fs' }).catch((err: unknown) => (checked = err));
      expect(checked).to.be.instanceOf(S3Error);
      const on = new BackendRegistry(new FsBackend(dir));
      expect(on.forBucket({ kind: 'fs' })).to.equal(on.fs);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
