import { expect } from 'chai';
import { BASELINE_VERSION, migrate, migrationVersions, SchemaHistoryError } from '../../images/control-plane/src/schema/migrate.js';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import { createPgliteSqlClient, createPgSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';
import { createTestDatabase } from '../support/pg.js';

describe('schema migrations and stored functions', function () {
  this.timeout(60_000);
  let sql: SqlClient;

  beforeEach(async () => {
    sql = await createPgliteSqlClient();
  });
  afterEach(async () => {
    await sql?.close();
  });

  const functions = async () =>
    (await sql.query<{ f: string }>("SELECT p.oid::regprocedure::text AS f FROM pg_proc p WHERE p.proname LIKE 'strata%' ORDER BY 1")).rows.map((r) => r.f);

  it('applies the baseline and each later migration once and defines the stored functions again on every start, exactly those of functions/', async () => {
    expect(await migrate(sql)).to.deep.equal(await migrationVersions());
    const defined = await functions();
    expect(defined).to.deep.equal([
      'strata_commit_items(jsonb)',
      'strata_commit_objects(jsonb)',
      'strata_commit_one(jsonb)',
      'strata_locator_lock_key(text,text)',
    ]);
    // A function no file defines (a renamed or removed one) goes; the files' functions come back.
    await sql.exec('CREATE FUNCTION strata_commit_object(integer) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$');
    await sql.exec('DROP FUNCTION strata_commit_items(jsonb)');
    expect(await migrate(sql)).to.deep.equal([]);
    expect(await functions()).to.deep.equal(defined);
  });

  it('refuses a database recording a version this build lacks (a newer build made it), and changes nothing in it', async () => {
    await sql.exec(`CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
      INSERT INTO schema_migrations (version) VALUES ('${BASELINE_VERSION}'), ('9999_from_a_newer_build')`);
    const err = await migrate(sql).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(SchemaHistoryError);
    expect((err as Error).message)
      .to.include('9999_from_a_newer_build')
      .and.include('newer Strata');
    expect(await functions()).to.deep.equal([]);
    const tables = await sql.query("SELECT 1 FROM pg_tables WHERE tablename = 'object_info'");
    expect(tables.rows).to.have.length(0);
  });

  it('a data plane answers not ready until the schema it commits through is migrated', async () => {
    const catalog = new Catalog(sql);
    const before = await catalog.ping().catch((e: unknown) => e);
    expect(before).to.be.instanceOf(Error).with.property('message').that.includes('not migrated');
    await migrate(sql);
    await catalog.ping();
  });
});

describe('control plane migrations on PostgreSQL', () => {
  it('two processes migrating a fresh database at once apply each version once', async () => {
    const db = await createTestDatabase();
    const a = createPgSqlClient(db.url);
    const b = createPgSqlClient(db.url);
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      const applied = [...ra, ...rb];
      expect(applied.filter((v) => v === BASELINE_VERSION)).to.have.length(1);
      expect(new Set(applied).size, 'no version applied twice').to.equal(applied.length);
      const rows = await a.query<{ version: string }>('SELECT version FROM schema_migrations');
      expect(rows.rows.map((r) => r.version).sort()).to.deep.equal([...applied].sort());
      expect(await migrate(a)).to.deep.equal([]);
    } finally {
      await a.close();
      await b.close();
      await db.drop();
    }
  });
});
