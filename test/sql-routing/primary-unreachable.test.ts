import { expect } from 'chai';
import { createPgSqlClient, DatabaseUnavailableError, RoutingSqlClient, type ReadTarget } from '../../images/service-kit/src/index.js';
import { startPgReplica, type PgReplicaHarness } from '../support/pg-replica.js';
import { rejectionOf } from '../support/rejection.js';
import { startTcpProxy, type TcpFaultProxy } from '../support/tcp-proxy.js';

interface Seen {
  replica: boolean;
  n: number;
}

const SEEN_SQL = 'SELECT pg_is_in_recovery() AS replica, (SELECT count(*)::int FROM frozen_items WHERE id = $1) AS n';

/**
 * The client's primary freezes (a stalled TCP proxy in front of it: connections stay open, nothing
 * moves) while its streaming replica stays healthy. Reads that tolerate lag keep going to the replica
 * without asking the primary; reads that must see every write go to the replica only while it provably
 * has all its primary flushed, and fail (DatabaseUnavailable, a 503) when it does not; writes fail at the
 * pool's limits, and everything works again soon after the primary answers.
 */
describe('RoutingSqlClient: reads while the primary hangs (real primary + streaming replica)', function () {
  this.timeout(120_000);
  let h: PgReplicaHarness;
  let proxy: TcpFaultProxy;
  let c: RoutingSqlClient;
  const routes: Array<[ReadTarget, string]> = [];

  before(async () => {
    h = await startPgReplica();
    const setup = createPgSqlClient(h.primaryUrl);
    await setup.exec('CREATE TABLE frozen_items (id int PRIMARY KEY)');
    await setup.close();
    proxy = await startTcpProxy({ port: Number(new URL(h.primaryUrl).port) });
    const viaProxy = Object.assign(new URL(h.primaryUrl), { port: String(proxy.port) }).toString();
    c = new RoutingSqlClient({
      primary: createPgSqlClient(viaProxy, { max: 4, connectTimeoutMs: 500, statementTimeoutMs: 800, queryTimeoutMs: 1000 }),
      replicas: [{ name: 'replica', client: createPgSqlClient(h.replicaUrl, { max: 4 }) }],
      defaultRead: 'latest',
      probeTimeoutMs: 300,
      primaryRetryMs: 500,
      onRead: (target, reason) => routes.push([target, reason]),
    });
  });
  afterEach(async () => {
    proxy.restore();
    await h.resumeReplay();
  });
  after(async () => {
    await c?.close();
    await proxy?.close();
    await h?.stop();
  });

  const seen = async (id: number, opts?: Parameters<RoutingSqlClient['read']>[2]) => (await c.read<Seen>(SEEN_SQL, [id], opts)).rows[0]!;

  it('answers lag-tolerant reads from the replica without asking the primary', async () => {
    await c.query('INSERT INTO frozen_items VALUES (1)');
    await h.waitForReplay();
    proxy.stall();
    routes.length = 0;
    for (let i = 0; i < 20; i++) expect(await seen(1, { stale: true })).to.deep.equal({ replica: true, n: 1 });
    expect(routes.every(([target, reason]) => target === 'replica' && reason === 'stale-ok')).to.equal(true);
  });

  it('answers reads that must see every write from a replica that has replayed all its primary flushed', async () => {
    await c.query('INSERT INTO frozen_items VALUES (2)');
    await h.waitForReplay();
    proxy.stall();
    routes.length = 0;
    // The row written just before the freeze is seen, read after read.
    for (let i = 0; i < 5; i++) expect(await seen(2)).to.deep.equal({ replica: true, n: 1 });
    expect(routes.at(-1)).to.deep.equal(['replica', 'primary-unreachable']);
    // A write fails at the pool's limits (503), not a hang; reads go on.
    expect(await rejectionOf(c.query('INSERT INTO frozen_items VALUES (3)'))).to.be.instanceOf(DatabaseUnavailableError);
    expect(await seen(2)).to.deep.equal({ replica: true, n: 1 });
  });

  it('refuses (DatabaseUnavailable) rather than answer from a replica that has not replayed what it received', async () => {
    await h.pauseReplay();
    await c.query('INSERT INTO frozen_items VALUES (4)');
    // Wait until the replica has received the write it cannot apply (replay paused).
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [row] = (await c.read<{ behind: boolean }>('SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn() AS behind', [], { stale: true })).rows;
      if (row!.behind) break;
      if (Date.now() > deadline) throw new Error('the replica never received the write');
      await new Promise((r) => setTimeout(r, 20));
    }
    proxy.stall();
    expect(await rejectionOf(seen(4))).to.be.instanceOf(DatabaseUnavailableError);
    await h.resumeReplay();
    await h.waitForReplay();
    expect(await seen(4)).to.deep.equal({ replica: true, n: 1 });
  });

  it('reads and writes use the primary again within a second of its return', async () => {
    proxy.stall();
    expect(await seen(1)).to.deep.include({ n: 1 });
    proxy.restore();
    const restored = Date.now();
    for (;;) {
      try {
        await c.query('INSERT INTO frozen_items VALUES (5)');
        break;
      } catch (err) {
        expect(err).to.be.instanceOf(DatabaseUnavailableError);
        if (Date.now() - restored > 10_000) throw err;
      }
    }
    routes.length = 0;
    for (;;) {
      await seen(5);
      if (routes.at(-1)?.[1] !== 'primary-unreachable') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(Date.now() - restored).to.be.below(3000);
    expect(await seen(5, { fresh: true })).to.deep.equal({ replica: false, n: 1 });
  });
});
