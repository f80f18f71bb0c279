import { expect } from 'chai';
import { startPgliteVacuum } from '../../images/standalone/src/pglite-vacuum.js';
import { createLogger, createPgliteSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';

describe('standalone: vacuum of the embedded database', function () {
  this.timeout(60_000);
  let sql: SqlClient;
  before(async () => {
    sql = await createPgliteSqlClient(undefined, { thread: true });
    await sql.exec('CREATE TABLE churn (id int PRIMARY KEY, n int)');
    await sql.query('INSERT INTO churn SELECT g, 0 FROM generate_series(1, 500) g');
  });
  after(async () => {
    await sql?.close();
  });
  const stats = async () => {
    // Counters reach pg_stat_* when a transaction ends after a forced flush (single-user mode too).
    await sql.query('SELECT pg_stat_force_next_flush()');
    await sql.query('SELECT 1');
    return (
      await sql.query<{ dead: number; vacuumed: Date | null; analyzed: Date | null; autovacuumed: Date | null }>(
        "SELECT n_dead_tup::int AS dead, last_vacuum AS vacuumed, last_analyze AS analyzed, last_autovacuum AS autovacuumed FROM pg_stat_user_tables WHERE relname = 'churn'",
      )
    ).rows[0]!;
  };

  it('PGlite leaves dead rows behind (no autovacuum); the timer vacuums and analyzes them away', async () => {
    for (let i = 0; i < 5; i++) await sql.query('UPDATE churn SET n = n + 1');
    // Let an autovacuum run if one existed: none does in single-user mode.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const before = await stats();
    expect(before.dead).to.be.greaterThan(1000);
    expect(before.autovacuumed).to.equal(null);
    expect(before.vacuumed).to.equal(null);

    const stop = startPgliteVacuum(sql, createLogger('test', 'silent'), 100);
    try {
      for (let i = 0; i < 100 && (await stats()).vacuumed === null; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      await stop();
    }
    const after = await stats();
    expect(after.vacuumed).to.be.instanceOf(Date);
    expect(after.analyzed).to.be.instanceOf(Date);
    expect(after.dead).to.equal(0);
    // Stopped: no run afterwards.
    const last = after.vacuumed!.getTime();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await stats()).vacuumed!.getTime()).to.equal(last);
  });

  it('as autovacuum: a table that grew gets planner statistics (a partitioned one for its parent too); an unchanged one is left alone', async () => {
    await sql.exec(`CREATE TABLE grown (id int PRIMARY KEY, v text);
      CREATE TABLE quiet (id int PRIMARY KEY);
      CREATE TABLE parted (id int, k int) PARTITION BY LIST ((id % 2));
      CREATE TABLE parted_0 PARTITION OF parted FOR VALUES IN (0);
      CREATE TABLE parted_1 PARTITION OF parted FOR VALUES IN (1);`);
    await sql.query('INSERT INTO quiet VALUES (1)');
    // Let a check pass with only `quiet` changed below every threshold (one row: nothing is due).
    let stop = startPgliteVacuum(sql, createLogger('test', 'silent'), 50);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await stop();
    const analyzed = async (table: string) =>
      (await sql.query<{ at: Date | null }>('SELECT last_analyze AS at FROM pg_stat_user_tables WHERE relname = $1', [table])).rows[0]?.at ?? null;
    expect(await analyzed('quiet')).to.equal(null);

    await sql.query("INSERT INTO grown SELECT g, 'v' || g FROM generate_series(1, 300) g");
    await sql.query('INSERT INTO parted SELECT g, g FROM generate_series(1, 300) g');
    const statsRows = async (table: string, inherited: boolean) =>
      (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stats WHERE tablename = $1 AND inherited = $2', [table, inherited])).rows[0].n;
    expect(await statsRows('grown', false)).to.equal(0);
    stop = startPgliteVacuum(sql, createLogger('test', 'silent'), 50);
    try {
      for (let i = 0; i < 100 && (await statsRows('parted', true)) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      await stop();
    }
    expect(await statsRows('grown', false)).to.be.greaterThan(0);
    expect(await statsRows('parted_1', false)).to.be.greaterThan(0);
    expect(await statsRows('parted', true), 'the partitioned table has statistics of its own').to.be.greaterThan(0);
    expect(await analyzed('quiet')).to.equal(null);
  });
});
