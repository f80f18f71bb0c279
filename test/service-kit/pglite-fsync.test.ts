import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createPgliteSqlClient, createRegistry, DatabaseUnavailableError } from '../../images/service-kit/src/index.js';
import { DURABLE_FS_SOURCE, type DurabilityCounters } from '../../images/service-kit/src/pglite-fsync.js';
import type { PgliteThreadClient } from '../../images/service-kit/src/pglite-thread.js';
import { eventually } from '../support/eventually.js';
import { injectSyncFault, pgliteWithSyncFaults } from '../support/pglite-faults.js';
import { freshDirPerSuite, freshDirPerTest } from '../support/temp-dir.js';

/**
 * PGlite's own fsyncs are no-ops in WASM; its thread syncs what PostgreSQL would have (pglite-fsync.ts).
 * The counters come from the thread's interposed file layer, which calls fs.fdatasyncSync / fsyncSync.
 */
describe('PGlite on disk: commits and checkpoints made durable by its thread', function () {
  this.timeout(120_000);
  const tmp = freshDirPerSuite('strata-pglite-fsync-');

  const open = async (name: string, fsync?: boolean) =>
    (await createPgliteSqlClient(path.join(tmp.path, name), { thread: true, ...(fsync === undefined ? {} : { fsync }) })) as PgliteThreadClient;
  const counters = async (sql: PgliteThreadClient): Promise<DurabilityCounters> => {
    const c = await sql.durability();
    if (!c) throw new Error('no durability counters: the file layer is not installed');
    return c;
  };

  it('syncs the WAL before a commit is answered, and only when the statement wrote', async () => {
    const sql = await open('commits');
    try {
      await sql.exec('CREATE TABLE t (id serial PRIMARY KEY, v text)');
      const before = await counters(sql);
      await sql.query('INSERT INTO t (v) VALUES ($1)', ['one']);
      const afterInsert = await counters(sql);
      expect(afterInsert.walSyncs, 'an INSERT syncs the WAL').to.be.greaterThan(before.walSyncs);
      expect(afterInsert.events.at(-1)).to.equal('wal');
      await sql.query('SELECT * FROM t');
      await sql.query('SELECT 1');
      expect((await counters(sql)).walSyncs, 'reads write no WAL and sync nothing').to.equal(afterInsert.walSyncs);
      // One sync per writing exchange, whatever the transaction holds.
      await sql.transaction(async (tx) => {
        for (let i = 0; i < 20; i++) await tx.query('INSERT INTO t (v) VALUES ($1)', [`row ${i}`]);
      });
      const afterTx = await counters(sql);
      expect(afterTx.walSyncs - afterInsert.walSyncs).to.be.within(1, 22);
    } finally {
      await sql.close();
    }
  });

  it('a checkpoint syncs the data files it covers before pg_control, then pg_control itself', async () => {
    const sql = await open('checkpoint');
    try {
      await sql.exec('CREATE TABLE big (id serial PRIMARY KEY, v text)');
      await sql.query("INSERT INTO big (v) SELECT repeat('x', 500) FROM generate_series(1, 2000)");
      const before = await counters(sql);
      await sql.exec('CHECKPOINT');
      const after = await counters(sql);
      expect(after.dataSyncs, 'data files synced').to.be.greaterThan(before.dataSyncs);
      expect(after.controlSyncs, 'pg_control synced').to.be.greaterThan(before.controlSyncs);
      // The checkpoint's own syncs, in order (the thread keeps the last 64; far fewer happened here).
      expect(after.events.length).to.be.lessThan(64);
      const checkpoint = after.events.slice(before.events.length);
      expect(checkpoint.indexOf('data'), JSON.stringify(checkpoint)).to.be.within(0, checkpoint.indexOf('control') - 1);
    } finally {
      await sql.close();
    }
  });

  for (const fault of ['fail', 'exit'] as const) {
    it(`a statement whose WAL sync ${fault === 'fail' ? 'failed' : 'was cut short by the thread ending'} has an unknown outcome (DatabaseUnavailableError), and so has every statement after it`, async () => {
      const dir = path.join(tmp.path, `fault-${fault}`);
      fs.mkdirSync(dir);
      const sql = await pgliteWithSyncFaults(dir);
      try {
        await sql.exec('CREATE TABLE t (v text)');
        await injectSyncFault(dir, fault);
        const [insert, read] = await Promise.allSettled([sql.query('INSERT INTO t VALUES ($1)', ['ran']), sql.query('SELECT 1')]);
        expect(insert.status === 'rejected' && insert.reason).to.be.instanceOf(DatabaseUnavailableError);
        expect(read.status === 'rejected' && read.reason).to.be.instanceOf(DatabaseUnavailableError);
        await injectSyncFault(dir, 'none');
        // Stopped, as PostgreSQL after a PANIC: syncs that work again change nothing until it is opened again.
        expect(await sql.query('SELECT 1').catch((err: unknown) => err)).to.be.instanceOf(DatabaseUnavailableError);
      } finally {
        await sql.close();
      }
      // Opened again (recovery from the WAL): the statement had run, and its row is there.
      const reopened = await pgliteWithSyncFaults(dir);
      try {
        expect((await reopened.query<{ v: string }>('SELECT v FROM t')).rows).to.deep.equal([{ v: 'ran' }]);
      } finally {
        await reopened.close();
      }
    });
  }

  it('is opened again by itself once its thread stopped (recovery from the WAL), while the disk fails again and again too', async () => {
    const dir = path.join(tmp.path, 'reopen');
    fs.mkdirSync(dir);
    const registry = createRegistry('test', false);
    const sql = await pgliteWithSyncFaults(dir, { reopenDelaysMs: { first: 50, max: 200 }, registry });
    const restarts = async () =>
      Object.fromEntries(
        ((await registry.getSingleMetric('strata_embedded_database_restarts_total')?.get())?.values ?? []).map((v) => [v.labels.event, v.value]),
      );
    try {
      await sql.exec('CREATE TABLE t (v text)');
      await sql.query('INSERT INTO t VALUES ($1)', ['acknowledged']);
      await injectSyncFault(dir, 'fail');
      expect(await sql.query('INSERT INTO t VALUES ($1)', ['unknown']).catch((err: unknown) => err)).to.be.instanceOf(DatabaseUnavailableError);
      // The disk keeps failing: a write is refused while no thread runs, or stops the new thread at its sync.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(await sql.query('INSERT INTO t VALUES ($1)', ['unknown too']).catch((err: unknown) => err)).to.be.instanceOf(DatabaseUnavailableError);
      await injectSyncFault(dir, 'none');
      // Working again without a restart of the process: what was acknowledged is there, and writes commit.
      const rows = await eventually(
        async () => (await sql.query<{ v: string }>('SELECT v FROM t ORDER BY v')).rows.map((r) => r.v),
        'the database open again',
        20_000,
      );
      expect(rows).to.include('acknowledged');
      await sql.query('INSERT INTO t VALUES ($1)', ['after']);
      // Counted for the operator: each stop (the second write may have met a new thread, or none yet), each reopening.
      const counted = await restarts();
      expect(counted.stopped).to.be.at.least(1);
      expect(counted.reopened).to.equal(counted.stopped);
      expect((await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM t WHERE v = 'after'")).rows[0]!.n).to.equal(1);
    } finally {
      await sql.close();
    }
    // Closed for good: no thread was left behind on the directory (opening it again works and sees every write).
    const reopened = await pgliteWithSyncFaults(dir);
    try {
      expect((await reopened.query<{ v: string }>("SELECT v FROM t WHERE v IN ('acknowledged', 'after') ORDER BY v")).rows.map((r) => r.v)).to.deep.equal([
        'acknowledged',
        'after',
      ]);
    } finally {
      await reopened.close();
    }
  });

  it('keeps its data across a restart, and can be turned off (no file layer, nothing synced)', async () => {
    const first = await open('restart');
    await first.exec('CREATE TABLE kept (v text)');
    await first.query('INSERT INTO kept VALUES ($1)', ['survives']);
    await first.close();
    const second = await open('restart', false);
    try {
      expect((await second.query<{ v: string }>('SELECT v FROM kept')).rows).to.deep.equal([{ v: 'survives' }]);
      await second.query('INSERT INTO kept VALUES ($1)', ['again']);
      expect(await second.durability()).to.equal(undefined);
    } finally {
      await second.close();
    }
  });
});

describe('the durable file layer on its own (real files, a copy of the fs module)', () => {
  type Layer = { afterExchange(): void; answer(ok: () => void, fail: (err: Error) => void): void; syncAll(): void; stats: DurabilityCounters };
  const install = new Function(`${DURABLE_FS_SOURCE}; return installDurableFs;`)() as (f: typeof fs, p: typeof path, dir: string) => Layer;
  const tmp = freshDirPerTest('strata-durable-fs-');

  it('skips a changed directory that is gone by the time it would be synced (a dropped database)', () => {
    const fsCopy = { ...fs };
    const durable = install(fsCopy, path, tmp.path);
    fs.mkdirSync(path.join(tmp.path, 'base', '16384'), { recursive: true });
    const file = path.join(tmp.path, 'base', '16384', '1259');
    const fd = fsCopy.openSync(file, fs.constants.O_CREAT | fs.constants.O_WRONLY);
    fsCopy.writeSync(fd, Buffer.from('page'));
    fsCopy.closeSync(fd);
    fs.rmSync(path.join(tmp.path, 'base', '16384'), { recursive: true });
    expect(() => durable.afterExchange()).not.to.throw();
    expect(durable.stats.dataSyncs, 'the file was synced when it closed').to.equal(1);
  });

  it('syncs WAL writes and new directories after an exchange; data before pg_control, then pg_control', () => {
    const fsCopy = { ...fs };
    const durable = install(fsCopy, path, tmp.path);
    for (const sub of ['pg_wal', 'global', 'base']) fs.mkdirSync(path.join(tmp.path, sub));
    const wal = fsCopy.openSync(path.join(tmp.path, 'pg_wal', '000000010000000000000001'), fs.constants.O_CREAT | fs.constants.O_WRONLY);
    const data = fsCopy.openSync(path.join(tmp.path, 'base', '1259'), fs.constants.O_CREAT | fs.constants.O_WRONLY);
    const control = fsCopy.openSync(path.join(tmp.path, 'global', 'pg_control'), fs.constants.O_CREAT | fs.constants.O_WRONLY);
    fsCopy.writeSync(wal, Buffer.from('commit record'));
    fsCopy.writeSync(data, Buffer.from('data page'));
    durable.afterExchange();
    expect(durable.stats).to.include({ walSyncs: 1, dataSyncs: 0, controlSyncs: 0 });
    expect(durable.stats.dirSyncs, 'pg_wal, base and global got new entries').to.equal(3);
    durable.afterExchange();
    expect(durable.stats.walSyncs, 'nothing written since: nothing synced').to.equal(1);
    fsCopy.writeSync(control, Buffer.from('checkpoint'));
    expect(durable.stats).to.include({ dataSyncs: 1, controlSyncs: 1 });
    expect(durable.stats.events.slice(-2)).to.deep.equal(['data', 'control']);
    for (const fd of [wal, data, control]) fsCopy.closeSync(fd);
    // Files outside the cluster are left alone.
    const outside = fsCopy.openSync(path.join(os.tmpdir(), `strata-outside-${process.pid}`), 'w');
    fsCopy.writeSync(outside, Buffer.from('x'));
    fsCopy.closeSync(outside);
    fs.rmSync(path.join(os.tmpdir(), `strata-outside-${process.pid}`));
    durable.afterExchange();
    expect(durable.stats).to.include({ walSyncs: 1, dataSyncs: 1 });
  });

  it('answers in order once a sync started after their writes has finished, the next exchanges running meanwhile', async () => {
    const fsCopy = { ...fs };
    const durable = install(fsCopy, path, tmp.path);
    fs.mkdirSync(path.join(tmp.path, 'pg_wal'));
    const wal = fsCopy.openSync(path.join(tmp.path, 'pg_wal', '000000010000000000000001'), fs.constants.O_CREAT | fs.constants.O_WRONLY);
    durable.afterExchange(); // (the new file's directory entry)
    const answered: string[] = [];
    const fail = (err: Error) => answered.push(`failed: ${err.message}`);
    // Nothing written, nothing waiting: answered at once.
    durable.answer(() => answered.push('read'), fail);
    expect(answered).to.deep.equal(['read']);
    // A write: its answer waits for the WAL's sync, which runs off the thread.
    fsCopy.writeSync(wal, Buffer.from('commit 1'));
    durable.answer(() => answered.push('commit 1'), fail);
    expect([answered, durable.stats.walSyncs]).to.deep.equal([['read'], 0]);
    // The next exchanges run before it has finished: a write (for the next sync) and a read behind it.
    fsCopy.writeSync(wal, Buffer.from('commit 2'));
    durable.answer(() => answered.push('commit 2'), fail);
    durable.answer(() => answered.push('read 2'), fail);
    // PGlite closes the file while its sync runs: it stays open until the sync is done.
    fsCopy.closeSync(wal);
    expect(() => fs.fstatSync(wal), 'still open while its sync runs').not.to.throw();
    expect(answered).to.deep.equal(['read']);
    for (let i = 0; i < 200 && answered.length < 4; i++) await new Promise((r) => setTimeout(r, 5));
    expect(answered).to.deep.equal(['read', 'commit 1', 'commit 2', 'read 2']);
    // Commit 1's sync, then the synchronous one at close (commit 2's write, made while the first ran).
    expect(durable.stats.walSyncs).to.equal(2);
    expect(() => fs.fstatSync(wal), 'closed once its sync finished').to.throw();
    durable.answer(() => answered.push('read 3'), fail);
    expect(answered.at(-1)).to.equal('read 3');
  });

  it('a failed sync fails the answers that waited for it, and every answer after it (a PANIC: nothing durable any more)', async () => {
    const fsCopy = { ...fs };
    let failNext = true;
    fsCopy.fdatasync = ((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
      if (failNext) {
        failNext = false;
        return setImmediate(() => cb(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })));
      }
      return fs.fdatasync(fd, cb);
    }) as typeof fs.fdatasync;
    const durable = install(fsCopy, path, tmp.path);
    fs.mkdirSync(path.join(tmp.path, 'pg_wal'));
    const wal = fsCopy.openSync(path.join(tmp.path, 'pg_wal', '000000010000000000000001'), fs.constants.O_CREAT | fs.constants.O_WRONLY);
    const answered: string[] = [];
    fsCopy.writeSync(wal, Buffer.from('commit 1'));
    durable.answer(
      () => answered.push('commit 1'),
      (err) => answered.push(`commit 1 failed: ${err.message}`),
    );
    for (let i = 0; i < 200 && answered.length < 1; i++) await new Promise((r) => setTimeout(r, 5));
    fsCopy.writeSync(wal, Buffer.from('commit 2'));
    durable.answer(
      () => answered.push('commit 2'),
      (err) => answered.push(`commit 2 failed: ${err.message}`),
    );
    for (let i = 0; i < 200 && answered.length < 2; i++) await new Promise((r) => setTimeout(r, 5));
    durable.answer(
      () => answered.push('read'),
      (err) => answered.push(`read failed: ${err.message}`),
    );
    // (The sync that succeeded after the failed one proves nothing: the kernel may have dropped those writes.)
    const eio = 'EIO: i/o error, fdatasync';
    expect(answered).to.deep.equal([`commit 1 failed: ${eio}`, `commit 2 failed: ${eio}`, `read failed: ${eio}`]);
    fsCopy.closeSync(wal);
  });
});
