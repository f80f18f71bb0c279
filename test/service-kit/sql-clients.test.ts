import path from 'node:path';
import { expect } from 'chai';
import { createPgliteSqlClient, createPgSqlClient, isUniqueViolation, type SqlClient } from '../../images/service-kit/src/index.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { freshDirPerSuite } from '../support/temp-dir.js';

/** The SqlClient contract, the same on every client the services run on. */
const clients: Array<{ name: string; open: () => Promise<{ sql: SqlClient; done: () => Promise<void> }> }> = [
  { name: 'PGlite on the event loop', open: async () => ({ sql: await createPgliteSqlClient(), done: async () => undefined }) },
  { name: 'PGlite on its own thread', open: async () => ({ sql: await createPgliteSqlClient(undefined, { thread: true }), done: async () => undefined }) },
  {
    name: 'PostgreSQL',
    open: async () => {
      const db: TestDatabase = await createTestDatabase('strata_sqlc');
      return { sql: createPgSqlClient(db.url, { max: 4 }), done: () => db.drop() };
    },
  },
];

for (const client of clients) {
  describe(`SqlClient: ${client.name}`, function () {
    this.timeout(60_000);
    let sql: SqlClient;
    let done: () => Promise<void>;

    before(async () => {
      ({ sql, done } = await client.open());
      await sql.exec(`CREATE TABLE t (id serial PRIMARY KEY, name text UNIQUE NOT NULL, doc jsonb, at timestamptz, n bigint);
                      CREATE TABLE u (v text)`);
    });
    after(async () => {
      await sql?.close();
      await done?.();
    });
    const names = async () => (await sql.query<{ name: string }>('SELECT name FROM t ORDER BY name')).rows.map((r) => r.name);

    it('answers rows with PostgreSQL types and counts affected rows', async () => {
      const at = new Date('2030-01-02T03:04:05.678Z');
      const ins = await sql.query<{ id: number }>('INSERT INTO t (name, doc, at, n) VALUES ($1, $2, $3, $4), ($5, NULL, NULL, NULL) RETURNING id', [
        'one',
        JSON.stringify({ a: [1, 'x'] }),
        at,
        2 ** 40,
        'two',
      ]);
      expect(ins.rowCount).to.equal(2);
      const row = (await sql.query<{ name: string; doc: unknown; at: Date; n: unknown }>('SELECT name, doc, at, n FROM t WHERE name = $1', ['one'])).rows[0]!;
      expect(row.doc).to.deep.equal({ a: [1, 'x'] });
      expect(row.at).to.be.instanceOf(Date);
      expect(row.at.toISOString()).to.equal(at.toISOString());
      expect(Number(row.n)).to.equal(2 ** 40);
      const upd = await sql.query('UPDATE t SET doc = NULL WHERE name = ANY($1)', [['one', 'two', 'three']]);
      expect(upd.rowCount).to.equal(2);
    });

    it('reads and writes every value as the pg client does (parameters serialised and columns parsed alike)', async () => {
      const bytes = Buffer.from([0, 1, 2, 255]);
      const at = new Date('2031-05-06T07:08:09.010Z');
      const row = (
        await sql.query(
          `SELECT $1::bytea AS bytes, $2::text[] AS texts, $3::int[] AS ints, $4::jsonb AS doc, $5::timestamptz AS at,
                  1.50::numeric AS num, 1.5::float8 AS f8, true AS yes, NULL::text AS nothing, 9007199254740991::int8 AS big,
                  '123e4567-e89b-12d3-a456-426614174000'::uuid AS id, 'it''s'::text AS quoted`,
          [bytes, ['a', 'b,c', 'd"e'], [1, 2, 3], { k: [true, null] }, at],
        )
      ).rows[0]!;
      expect(row).to.deep.equal({
        bytes,
        texts: ['a', 'b,c', 'd"e'],
        ints: [1, 2, 3],
        doc: { k: [true, null] },
        at,
        num: '1.50',
        f8: 1.5,
        yes: true,
        nothing: null,
        big: 9007199254740991,
        id: '123e4567-e89b-12d3-a456-426614174000',
        quoted: "it's",
      });
      expect(Buffer.isBuffer(row.bytes)).to.equal(true);
      const none = await sql.query('SELECT 1 FROM t WHERE false');
      expect(none).to.deep.equal({ rows: [], rowCount: 0 });
    });

    it("keeps PostgreSQL's error fields: a unique violation is recognised, a missing function is 42883", async () => {
      const dup = await sql.query('INSERT INTO t (name) VALUES ($1)', ['one']).catch((err: unknown) => err);
      expect(dup).to.be.instanceOf(Error);
      expect(isUniqueViolation(dup)).to.equal(true);
      expect((dup as Error).message).to.match(/duplicate key/);
      const missing = await sql.query('SELECT no_such_function_here(1)').catch((err: unknown) => err);
      expect(missing).to.have.property('code', '42883');
      // The client is still usable after errors.
      expect(await names()).to.deep.equal(['one', 'two']);
    });

    it('answers the same text right after the schema changes under it, and after it failed to parse or run', async () => {
      for (let i = 0; i < 3; i++) await sql.query('SELECT * FROM u');
      await sql.exec('ALTER TABLE u ADD COLUMN w int');
      await sql.query("INSERT INTO u (v, w) VALUES ('x', 7)");
      expect((await sql.query('SELECT * FROM u')).rows).to.deep.equal([{ v: 'x', w: 7 }]);
      const missing = await sql.query('SELECT made_later($1::int) AS n', [1]).catch((err: unknown) => err);
      expect(missing).to.have.property('code', '42883');
      await sql.exec('CREATE FUNCTION made_later(int) RETURNS int LANGUAGE sql AS $$ SELECT $1 + 1 $$');
      expect((await sql.query('SELECT made_later($1::int) AS n', [1])).rows).to.deep.equal([{ n: 2 }]);
      const insert = 'INSERT INTO t (name) VALUES ($1) RETURNING name';
      expect(isUniqueViolation(await sql.query(insert, ['one']).catch((err: unknown) => err))).to.equal(true);
      expect((await sql.query(insert, ['three'])).rows).to.deep.equal([{ name: 'three' }]);
      await sql.query('DELETE FROM t WHERE name = $1', ['three']);
      await sql.exec('ALTER TABLE u DROP COLUMN w');
      expect((await sql.query('SELECT * FROM u')).rows).to.deep.equal([{ v: 'x' }]);
      await sql.query('DELETE FROM u');
    });

    it('commits a transaction, and rolls all of it back when its function throws', async () => {
      const value = await sql.transaction(async (tx) => {
        await tx.query('INSERT INTO t (name) VALUES ($1)', ['three']);
        return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM t')).rows[0]!.n;
      });
      expect(value).to.equal(3);
      const failed = await sql
        .transaction(async (tx) => {
          await tx.query('INSERT INTO t (name) VALUES ($1)', ['four']);
          throw new Error('changed my mind');
        })
        .catch((err: Error) => err);
      expect(failed).to.be.instanceOf(Error).with.property('message', 'changed my mind');
      const sqlFailed = await sql.transaction((tx) => tx.query('INSERT INTO t (name) VALUES ($1), ($1)', ['five'])).catch((err: unknown) => err);
      expect(isUniqueViolation(sqlFailed)).to.equal(true);
      expect(await names()).to.deep.equal(['one', 'three', 'two']);
    });

    it('statements from outside an open transaction are neither part of it nor undone by its rollback', async () => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let inside: () => void = () => undefined;
      const opened = new Promise<void>((resolve) => (inside = resolve));
      const tx = sql
        .transaction(async (t) => {
          await t.query("INSERT INTO u (v) VALUES ('inside')");
          inside();
          await gate;
          throw new Error('roll back');
        })
        .catch(() => 'rolled back');
      await opened;
      const outside = sql.query("INSERT INTO u (v) VALUES ('outside')");
      const script = sql.exec("INSERT INTO u (v) VALUES ('script')");
      await new Promise((resolve) => setTimeout(resolve, 50));
      release();
      expect(await tx).to.equal('rolled back');
      await outside;
      await script;
      expect((await sql.query<{ v: string }>('SELECT v FROM u ORDER BY v')).rows.map((r) => r.v)).to.deep.equal(['outside', 'script']);
    });

    it('runs many statements and transactions at once without mixing them up', async () => {
      const work = Array.from({ length: 40 }, (_, i) =>
        i % 4 === 0
          ? sql.transaction(async (tx) => {
              await tx.query('INSERT INTO t (name, n) VALUES ($1, $2)', [`c-${i}`, i]);
              return (await tx.query<{ n: unknown }>('SELECT n FROM t WHERE name = $1', [`c-${i}`])).rows[0]!.n;
            })
          : sql.query<{ n: unknown }>('INSERT INTO t (name, n) VALUES ($1, $2) RETURNING n', [`c-${i}`, i]).then((r) => r.rows[0]!.n),
      );
      expect((await Promise.all(work)).map(Number)).to.deep.equal(Array.from({ length: 40 }, (_, i) => i));
      expect((await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM t WHERE name LIKE 'c-%'")).rows[0]!.n).to.equal(40);
    });
  });
}

describe('PGlite: statements prepared once per session', function () {
  this.timeout(60_000);

  it('parses a text once, then only binds it; beyond 256 texts they still run (unnamed)', async () => {
    const sql = await createPgliteSqlClient(undefined, { thread: true });
    try {
      const prepared = async () =>
        (await sql.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements WHERE name LIKE 'strata_%' ORDER BY statement")).rows.map(
          (r) => r.statement,
        );
      for (let i = 0; i < 5; i++) expect((await sql.query<{ n: number }>('SELECT $1::int + 1 AS n', [i])).rows).to.deep.equal([{ n: i + 1 }]);
      expect((await prepared()).filter((text) => text === 'SELECT $1::int + 1 AS n')).to.have.length(1);
      // Concurrent first uses: one of them prepares, the others run unnamed; all answer.
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => sql.query<{ n: number }>('SELECT $1::int * 2 AS n', [i])));
      expect(answers.map((a) => a.rows[0]!.n)).to.deep.equal(Array.from({ length: 10 }, (_, i) => i * 2));
      expect((await prepared()).filter((text) => text === 'SELECT $1::int * 2 AS n')).to.have.length(1);
      // A statement that fails to parse is not kept.
      await sql.query('SELECT FROM nowhere_at_all').catch(() => undefined);
      expect((await prepared()).some((text) => text.includes('nowhere_at_all'))).to.equal(false);
      for (let i = 0; i < 300; i++) expect((await sql.query<{ n: number }>(`SELECT ${i}::int AS n`)).rows[0]!.n).to.equal(i);
      expect((await prepared()).length).to.equal(256);
    } finally {
      await sql.close();
    }
  });
});

describe('PGlite on its own thread: on disk', function () {
  this.timeout(120_000);
  const tmp = freshDirPerSuite('strata-pglite-thread-');

  it('creates the cluster, keeps the data across a restart, and refuses statements once closed', async () => {
    const first = await createPgliteSqlClient(path.join(tmp.path, 'db'), { thread: true });
    await first.exec("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives')");
    await first.close();
    const closed = await first.query('SELECT 1').catch((err: Error) => err);
    expect(closed).to.be.instanceOf(Error);
    // The same files open on the event loop, and on a thread again.
    const onLoop = await createPgliteSqlClient(path.join(tmp.path, 'db'));
    expect((await onLoop.query<{ v: string }>('SELECT v FROM kept')).rows).to.deep.equal([{ v: 'survives' }]);
    await onLoop.close();
    const again = await createPgliteSqlClient(path.join(tmp.path, 'db'), { thread: true });
    expect((await again.query<{ v: string }>('SELECT v FROM kept')).rows).to.deep.equal([{ v: 'survives' }]);
    await again.close();
  });
});

describe('new PGlite clusters are copies of one pristine cluster (initdb once per process)', function () {
  this.timeout(120_000);
  const tmp = freshDirPerSuite('strata-pglite-new-');
  const tables = async (sql: SqlClient) =>
    (await sql.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")).rows.map((r) => r.name);

  for (const [where, open] of [
    ['on disk, on a thread', (name: string) => createPgliteSqlClient(path.join(tmp.path, name), { thread: true })],
    ['on disk, on the event loop', (name: string) => createPgliteSqlClient(path.join(tmp.path, name))],
    ['in memory, on a thread', () => createPgliteSqlClient(undefined, { thread: true })],
    ['in memory, on the event loop', () => createPgliteSqlClient()],
  ] as const) {
    it(`${where}: each new database starts empty, whatever an earlier one wrote`, async () => {
      const first = await open(`${where}-1`);
      await first.exec("CREATE TABLE written_first (v text); INSERT INTO written_first VALUES ('one')");
      expect(await tables(first)).to.deep.equal(['written_first']);
      const second = await open(`${where}-2`);
      expect(await tables(second)).to.deep.equal([]);
      await second.exec('CREATE TABLE written_second (v int)');
      expect(await tables(first)).to.deep.equal(['written_first']);
      // A working cluster: the catalog, a transaction and the settings initdb writes.
      expect((await second.query<{ v: string }>('SHOW server_encoding')).rows[0]).to.deep.equal({ server_encoding: 'UTF8' });
      await Promise.all([first.close(), second.close()]);
    });
  }
});
