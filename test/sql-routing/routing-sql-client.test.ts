import { expect } from 'chai';
import pg from 'pg';
import {
  createPgRoutingSqlClient,
  createPgSqlClient,
  formatLsn,
  laterLsn,
  parseLsn,
  parseReplicaUrls,
  readQuery,
  RoutingSqlClient,
  type ReadTarget,
} from '../../images/service-kit/src/index.js';
import { startPgReplica, type PgReplicaHarness } from '../support/pg-replica.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/eventually.js';

interface Where {
  replica: boolean;
  port: number;
  n: number;
}

/** A read that says which server answered it and what it saw of row `id`. */
const WHERE_SQL = 'SELECT pg_is_in_recovery() AS replica, inet_server_port() AS port, (SELECT count(*)::int FROM items WHERE id = $1) AS n';

async function directCount(url: string, id: number): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ n: number }>('SELECT count(*)::int AS n FROM items WHERE id = $1', [id])).rows[0]!.n;
  } finally {
    await client.end();
  }
}

describe('RoutingSqlClient: read/write splitting with read-your-writes (real primary + streaming replica)', function () {
  this.timeout(120_000);
  let h: PgReplicaHarness;
  let replicaPort: number;
  let primaryPort: number;
  const clients: RoutingSqlClient[] = [];
  let nextId = 1;

  function client(opts: { unhealthyMs?: number; routes?: Array<[ReadTarget, string]> } = {}): RoutingSqlClient {
    const c = createPgRoutingSqlClient(h.primaryUrl, [h.replicaUrl], {
      max: 3,
      unhealthyMs: opts.unhealthyMs ?? 5000,
      onRead: (target, reason) => opts.routes?.push([target, reason]),
    });
    clients.push(c);
    return c;
  }

  async function where(c: RoutingSqlClient, id: number, opts?: Parameters<RoutingSqlClient['read']>[2]): Promise<Where> {
    const res = await c.read<Where>(WHERE_SQL, [id], opts);
    return res.rows[0]!;
  }

  /** Once the replica has replayed everything, `c` reads the newest row from it again. */
  async function readsReturnToReplica(c: RoutingSqlClient, what: string): Promise<void> {
    await h.waitForReplay();
    const id = nextId - 1;
    await eventually(async () => (await where(c, id)).replica, what);
    expect(await where(c, id)).to.deep.equal({ replica: true, port: replicaPort, n: 1 });
  }

  before(async () => {
    h = await startPgReplica();
    primaryPort = Number(new URL(h.primaryUrl).port);
    replicaPort = Number(new URL(h.replicaUrl).port);
    const setup = createPgSqlClient(h.primaryUrl);
    await setup.exec('CREATE TABLE items (id int PRIMARY KEY, note text)');
    await setup.close();
    await h.waitForReplay();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
  });
  after(async () => {
    await h?.stop();
  });

  it('sends writes to the primary and reads to the replica once it has caught up', async () => {
    const routes: Array<[ReadTarget, string]> = [];
    const c = client({ routes });
    const id = nextId++;
    const inserted = await c.query<{ replica: boolean }>('INSERT INTO items VALUES ($1, $2) RETURNING pg_is_in_recovery() AS replica', [id, 'a']);
    expect(inserted.rows[0]!.replica).to.equal(false);
    await h.waitForReplay();
    let seen: Where | undefined;
    await eventually(async () => (seen = await where(c, id)).replica, 'a read answered by the replica');
    expect(seen).to.deep.equal({ replica: true, port: replicaPort, n: 1 });
    expect(routes.at(-1)).to.deep.equal(['replica', 'caught-up']);
    expect(await c.writeLsn()).to.match(/^[0-9A-F]+\/[0-9A-F]+$/);
  });

  it('never answers a read after a write from a replica that has not replayed it (replay paused)', async () => {
    const routes: Array<[ReadTarget, string]> = [];
    const c = client({ routes });
    await h.waitForReplay();
    await h.pauseReplay();
    try {
      const id = nextId++;
      await c.query('INSERT INTO items VALUES ($1, $2)', [id, 'written while replay is paused']);
      expect(await directCount(h.replicaUrl, id)).to.equal(0); // the replica really is behind
      for (let i = 0; i < 5; i++) {
        expect(await where(c, id)).to.deep.equal({ replica: false, port: primaryPort, n: 1 });
      }
      expect(routes.every(([target, reason]) => target === 'primary' && reason === 'replica-behind')).to.equal(true);

      // Another service's client never wrote: it may read the (stale) replica unless handed the token.
      const other = client();
      const token = await c.writeLsn();
      expect(await where(other, id)).to.deep.include({ replica: true, n: 0 });
      expect(await where(other, id, { minLsn: token })).to.deep.include({ replica: false, n: 1 });
      expect(await where(other, id, { latest: true })).to.deep.include({ replica: false, n: 1 });
      // ...and a transaction (a write) by that client makes its later reads wait for it as well.
      const id2 = nextId++;
      await other.transaction(async (tx) => {
        await tx.query('INSERT INTO items VALUES ($1, $2)', [id2, 'in a transaction']);
      });
      expect(await where(other, id2)).to.deep.include({ replica: false, n: 1 });
    } finally {
      await h.resumeReplay();
    }
    await readsReturnToReplica(c, 'reads to return to the replica after replay resumed');
  });

  it('keeps read-your-writes under concurrent writers and readers while the replica streams', async () => {
    const routes: Array<[ReadTarget, string]> = [];
    const c = client({ routes });
    const first = nextId;
    nextId += 200;
    const worker = async (w: number) => {
      for (let i = 0; i < 20; i++) {
        const id = first + w * 20 + i;
        await c.query('INSERT INTO items VALUES ($1, $2)', [id, `worker ${w}`]);
        // Right after the write, and again a moment later when the replica may have caught up.
        expect((await where(c, id)).n, `row ${id} right after its write`).to.equal(1);
        await new Promise((r) => setTimeout(r, 5 + ((w * 7 + i) % 10)));
        expect((await where(c, id)).n, `row ${id} a moment after its write`).to.equal(1);
      }
    };
    await Promise.all(Array.from({ length: 10 }, (_, w) => worker(w)));
    expect(routes).to.have.length(400);
    // Both paths were exercised: the replica answered once it had replayed a row, the primary before.
    expect(routes.some(([target]) => target === 'primary')).to.equal(true);
    expect(routes.some(([target]) => target === 'replica')).to.equal(true);
  });

  it('with replicaWaitMs, waits for the replica to replay a write instead of going to the primary', async () => {
    const c = createPgRoutingSqlClient(h.primaryUrl, [h.replicaUrl], { max: 3, replicaWaitMs: 15_000 });
    clients.push(c);
    await h.waitForReplay();
    await h.pauseReplay();
    let answer: Where | undefined;
    try {
      const id = nextId++;
      await c.query('INSERT INTO items VALUES ($1, $2)', [id, 'waits for replay']);
      const reading = where(c, id).then((w) => (answer = w));
      await new Promise((r) => setTimeout(r, 200));
      expect(answer, 'no answer while the replica has not replayed the write').to.equal(undefined);
      await h.resumeReplay();
      await reading;
    } finally {
      await h.resumeReplay();
    }
    expect(answer).to.deep.equal({ replica: true, port: replicaPort, n: 1 });
  });

  it('reads the primary when asked for fresh data, even with the replica caught up', async () => {
    const c = client();
    await h.waitForReplay();
    await eventually(async () => (await where(c, 0)).replica, 'the replica to be used');
    expect(await where(c, 0, { fresh: true })).to.deep.include({ replica: false, port: primaryPort });
  });

  it('falls back to the primary while the replica is down and returns to it when it is back and caught up', async () => {
    const routes: Array<[ReadTarget, string]> = [];
    const c = client({ unhealthyMs: 200, routes });
    await h.waitForReplay();
    await eventually(async () => (await where(c, 0)).replica, 'the replica to be used');

    await h.stopReplica();
    try {
      const id = nextId++;
      await c.query('INSERT INTO items VALUES ($1, $2)', [id, 'written while the replica is down']);
      for (let i = 0; i < 3; i++) expect(await where(c, id)).to.deep.equal({ replica: false, port: primaryPort, n: 1 });
      // Reads that need nothing in particular also fall back instead of failing.
      const other = client({ unhealthyMs: 200 });
      expect(await where(other, id)).to.deep.include({ replica: false, n: 1 });
      expect(c.replicaStatus()[0]!.healthy).to.equal(false);
      expect(routes.some(([target, reason]) => target === 'primary' && /no-healthy-replica|replica-failed/.test(reason))).to.equal(true);
    } finally {
      await h.startReplica();
    }
    await readsReturnToReplica(c, 'reads to return to the replica');
    expect(c.replicaStatus()[0]!.healthy).to.equal(true);
  });

  it('skips a replica that stops answering (silent network) after the probe timeout, and uses it again later', async () => {
    const replica = new URL(h.replicaUrl);
    const outage = await startTcpProxy({ host: replica.hostname, port: Number(replica.port) });
    const failedReplicas: string[] = [];
    try {
      const viaProxy = new URL(h.replicaUrl);
      viaProxy.port = String(outage.port);
      const c = new RoutingSqlClient({
        primary: createPgSqlClient(h.primaryUrl, { max: 2 }),
        replicas: [{ name: 'proxied', client: createPgSqlClient(viaProxy.toString(), { max: 3 }) }],
        probeTimeoutMs: 300,
        // Long enough that a slow CI machine cannot see the window end between the two reads below.
        unhealthyMs: 5000,
        onReplicaError: (name) => failedReplicas.push(name),
      });
      clients.push(c);
      await h.waitForReplay();
      await eventually(async () => (await where(c, 0)).replica, 'the replica to be used');

      outage.stall();
      // Let the last replay-position probe age past lsnRefreshMs, so the next read probes the stalled
      // replica (on a fast machine everything below could otherwise reuse the cached position).
      await new Promise((r) => setTimeout(r, 50));
      const id = nextId++;
      await c.query('INSERT INTO items VALUES ($1, $2)', [id, 'written while the replica is unreachable']);
      expect(await where(c, id)).to.deep.equal({ replica: false, port: primaryPort, n: 1 });
      expect(await where(c, 0)).to.deep.include({ replica: false }); // nothing required, still not the dead replica
      expect(failedReplicas).to.include('proxied');
      expect(c.replicaStatus()[0]!.healthy).to.equal(false);

      outage.restore();
      await h.waitForReplay();
      await eventually(async () => (await where(c, id)).replica, 'reads to return to the replica');
    } finally {
      await outage.close();
    }
  });

  it('throws errors of the statement itself instead of hiding them behind a fallback', async () => {
    const c = client();
    await h.waitForReplay();
    await eventually(async () => (await where(c, 0)).replica, 'the replica to be used');
    const err = await c.read('SELECT * FROM no_such_table').then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(err?.code).to.equal('42P01');
    expect(c.replicaStatus()[0]!.healthy).to.equal(true);
  });

  it('lets plain clients run readQuery() as an ordinary query', async () => {
    const plain = createPgSqlClient(h.primaryUrl, { max: 1 });
    try {
      const res = await readQuery<{ replica: boolean }>(plain, 'SELECT pg_is_in_recovery() AS replica', [], { latest: true });
      expect(res.rows[0]!.replica).to.equal(false);
    } finally {
      await plain.close();
    }
  });
});

describe('WAL position helpers', () => {
  it('parses, orders and formats pg_lsn text', () => {
    expect(parseLsn('0/0')).to.equal(0n);
    expect(parseLsn('1/0')).to.equal(1n << 32n);
    expect(parseLsn('16/B374D848') > parseLsn('16/B374D847')).to.equal(true);
    expect(parseLsn('2/0') > parseLsn('1/FFFFFFFF')).to.equal(true);
    expect(formatLsn(parseLsn('16/B374D848'))).to.equal('16/B374D848');
    expect(laterLsn('1/10', '1/9')).to.equal('1/10');
    expect(laterLsn(undefined, '0/1')).to.equal('0/1');
    expect(() => parseLsn('nonsense')).to.throw(/not a WAL position/);
    expect(parseReplicaUrls(' postgres://a:5432/db, postgres://b:5432/db ')).to.deep.equal(['postgres://a:5432/db', 'postgres://b:5432/db']);
    expect(parseReplicaUrls('')).to.deep.equal([]);
  });
});
