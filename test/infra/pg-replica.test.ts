import { existsSync } from 'node:fs';
import { expect } from 'chai';
import pg from 'pg';
import { query, startPgReplica, type PgReplicaHarness } from '../support/pg-replica.js';
import { rejectionOf } from '../support/rejection.js';
import { eventually } from '../support/eventually.js';

const q = <R extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = []): Promise<R[]> => query<R>(url, text, params, 3000);

describe('test harness: PostgreSQL primary + streaming replica', function () {
  this.timeout(180_000);
  let h: PgReplicaHarness;

  before(async () => {
    h = await startPgReplica();
  });
  after(() => h?.stop());

  it('streams from a throw-away primary on its own port, not the machine server', async () => {
    expect(h.primaryUrl).not.to.contain(':5432/');
    expect(h.replicaUrl).not.to.contain(':5432/');
    const [{ state }] = (await q<{ state: string }>(h.primaryUrl, 'SELECT state FROM pg_stat_replication')) as [{ state: string }];
    expect(state).to.equal('streaming');
    const [{ recovery }] = (await q<{ recovery: boolean }>(h.replicaUrl, 'SELECT pg_is_in_recovery() AS recovery')) as [{ recovery: boolean }];
    expect(recovery).to.equal(true);
  });

  it('replicates writes, and the replica refuses writes', async () => {
    await q(h.primaryUrl, 'CREATE TABLE harness_t (id int PRIMARY KEY, v text)');
    await q(h.primaryUrl, "INSERT INTO harness_t VALUES (1, 'one')");
    await h.waitForReplay();
    expect(await q(h.replicaUrl, 'SELECT v FROM harness_t WHERE id = 1')).to.deep.equal([{ v: 'one' }]);
    expect(((await rejectionOf(q(h.replicaUrl, "INSERT INTO harness_t VALUES (2, 'two')"))) as Error).message).to.match(/read-only transaction/);
  });

  it('simulates lag: with replay paused the replica receives WAL but does not show it', async () => {
    await h.pauseReplay();
    await q(h.primaryUrl, "INSERT INTO harness_t VALUES (3, 'three')");
    const [{ lsn }] = (await q<{ lsn: string }>(h.primaryUrl, 'SELECT pg_current_wal_insert_lsn()::text AS lsn')) as [{ lsn: string }];
    await eventually(
      async () => (await q<{ ok: boolean }>(h.replicaUrl, 'SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn AS ok', [lsn]))[0]!.ok,
      'the WAL to arrive',
    );
    expect(await q(h.replicaUrl, 'SELECT v FROM harness_t WHERE id = 3')).to.deep.equal([]);
    expect(await q(h.primaryUrl, 'SELECT v FROM harness_t WHERE id = 3')).to.deep.equal([{ v: 'three' }]);
    await h.resumeReplay();
    await h.waitForReplay();
    expect(await q(h.replicaUrl, 'SELECT v FROM harness_t WHERE id = 3')).to.deep.equal([{ v: 'three' }]);
  });

  it('stops and restarts the replica, which catches up', async () => {
    await h.stopReplica();
    expect(await rejectionOf(q(h.replicaUrl, 'SELECT 1'))).to.be.instanceOf(Error);
    await q(h.primaryUrl, "INSERT INTO harness_t VALUES (4, 'four')");
    await h.startReplica();
    await h.waitForReplay();
    expect(await q(h.replicaUrl, 'SELECT count(*)::int AS n FROM harness_t')).to.deep.equal([{ n: 3 }]);
  });

  it('stop() shuts both servers down and removes their files', async () => {
    const dataDir = (await q<{ d: string }>(h.primaryUrl, "SELECT current_setting('data_directory') AS d"))[0]!.d;
    expect(existsSync(dataDir)).to.equal(true);
    await h.stop();
    await h.stop();
    expect(existsSync(dataDir)).to.equal(false);
    expect(await rejectionOf(q(h.primaryUrl, 'SELECT 1'))).to.be.instanceOf(Error);
  });
});
