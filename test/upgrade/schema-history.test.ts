// Every migration history an earlier build recorded, replayed from its own files (schema-history/: each
// version of each pre-baseline migration as git held it, and which ones each build had), then migrated
// by this build: the catalog must equal a fresh database's, fact by fact.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { BASELINE_VERSION, migrate, migrationVersions, PRE_BASELINE_VERSIONS, SchemaHistoryError } from '../../images/control-plane/src/schema/migrate.js';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import { createPgliteSqlClient, createPgSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';
import { createTestDatabase } from '../support/pg.js';
import { rejectionOf } from '../support/rejection.js';
import { schemaCatalog } from '../support/schema-catalog.js';

const HISTORY_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'schema-history');

/** A build that changed the migrations: its commit and its files (`<version>@<commit that wrote it>`). */
interface Build {
  commit: string;
  date: string;
  migrations: string[];
}
const builds = JSON.parse(readFileSync(path.join(HISTORY_DIR, 'builds.json'), 'utf8')) as Build[];
const versionOf = (file: string) => file.split('@')[0]!;

/** What the migrate() of the builds before the baseline did: each file not yet recorded, in order, recorded. */
async function migrateAsBuild(sql: SqlClient, build: Build): Promise<void> {
  await sql.transaction(async (tx) => {
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const done = new Set((await tx.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    for (const file of build.migrations) {
      if (done.has(versionOf(file))) continue;
      await tx.exec(readFileSync(path.join(HISTORY_DIR, 'migrations', `${file}.sql`), 'utf8'));
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [versionOf(file)]);
    }
  });
}

const recordedVersions = async (sql: SqlClient) =>
  (await sql.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY 1')).rows.map((r) => r.version);

async function withDatabase<T>(fn: (sql: SqlClient) => Promise<T>): Promise<T> {
  const db = await createTestDatabase('strata_schema_history');
  const sql = createPgSqlClient(db.url);
  try {
    return await fn(sql);
  } finally {
    await sql.close();
    await db.drop();
  }
}

describe('schema: every earlier migration history upgrades to the baseline', function () {
  this.timeout(300_000);
  let fresh: string[];
  /** What an upgrade applies and then records: the baseline (in place of the old history) and every later version. */
  let all: string[];

  before(async () => {
    all = await migrationVersions();
    expect(all[0]).to.equal(BASELINE_VERSION);
    fresh = await withDatabase(async (sql) => {
      await migrate(sql);
      return schemaCatalog(sql);
    });
  });

  it('the recorded builds cover every pre-baseline version, each file version and no other', () => {
    const recorded = new Set(builds.flatMap((b) => b.migrations.map(versionOf)));
    expect([...recorded].sort()).to.deep.equal([...PRE_BASELINE_VERSIONS]);
    for (const b of builds) expect(b.migrations.map(versionOf), b.commit).to.deep.equal(PRE_BASELINE_VERSIONS.slice(0, b.migrations.length));
  });

  for (const build of builds) {
    it(`a PostgreSQL database of ${build.commit} (${build.date.slice(0, 10)}, ${build.migrations.length} migrations) gets the baseline's schema, its rows kept`, async () => {
      await withDatabase(async (sql) => {
        await migrateAsBuild(sql, build);
        await sql.exec(`INSERT INTO buckets (name, owner) VALUES ('kept', 'root');
          INSERT INTO users (username, password_hash, access_key, secret_key_enc) VALUES ('root', 'h', 'AK', 's')`);
        expect(await migrate(sql)).to.deep.equal(all);
        expect(await schemaCatalog(sql)).to.deep.equal(fresh);
        expect(await recordedVersions(sql)).to.deep.equal(all);
        expect((await sql.query('SELECT name, owner FROM buckets')).rows).to.deep.equal([{ name: 'kept', owner: 'root' }]);
        expect(await migrate(sql), 'a second start applies nothing').to.deep.equal([]);
      });
    });
  }

  it('a database upgraded through every build in turn gets the baseline schema too', async () => {
    await withDatabase(async (sql) => {
      for (const build of builds) await migrateAsBuild(sql, build);
      expect(await recordedVersions(sql)).to.deep.equal([...PRE_BASELINE_VERSIONS]);
      expect(await migrate(sql)).to.deep.equal(all);
      expect(await schemaCatalog(sql)).to.deep.equal(fresh);
    });
  });

  it('an embedded (PGlite) database of the oldest and of the last pre-baseline build gets the baseline schema', async () => {
    const freshPglite = await createPgliteSqlClient();
    let reference: string[];
    try {
      await migrate(freshPglite);
      reference = await schemaCatalog(freshPglite);
    } finally {
      await freshPglite.close();
    }
    for (const build of [builds[0]!, builds[builds.length - 1]!]) {
      const sql = await createPgliteSqlClient();
      try {
        await migrateAsBuild(sql, build);
        await migrate(sql);
        expect(await schemaCatalog(sql), build.commit).to.deep.equal(reference);
      } finally {
        await sql.close();
      }
    }
  });

  it('two processes upgrading a database of the last pre-baseline build at once bring it to the baseline once', async () => {
    const db = await createTestDatabase('strata_schema_history');
    const [a, b] = [createPgSqlClient(db.url), createPgSqlClient(db.url)];
    try {
      await migrateAsBuild(a, builds[builds.length - 1]!);
      const applied = (await Promise.all([migrate(a), migrate(b)])).flat();
      expect(applied).to.deep.equal(all);
      expect(await recordedVersions(a)).to.deep.equal(all);
      expect(await schemaCatalog(a)).to.deep.equal(fresh);
    } finally {
      await a.close();
      await b.close();
      await db.drop();
    }
  });

  it('a data plane is not ready on a database of the last pre-baseline build (its commit function has the same name) until it is migrated', async () => {
    await withDatabase(async (sql) => {
      await migrateAsBuild(sql, builds[builds.length - 1]!);
      const catalog = new Catalog(sql);
      expect(await rejectionOf(catalog.ping()))
        .to.have.property('message')
        .that.includes('not migrated');
      await migrate(sql);
      await catalog.ping();
    });
  });

  it('refuses a database a newer build made, and changes nothing in it', async () => {
    await withDatabase(async (sql) => {
      await migrate(sql);
      await sql.exec("INSERT INTO schema_migrations (version) VALUES ('9999_from_the_future')");
      const before = await schemaCatalog(sql);
      const err = await migrate(sql).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(SchemaHistoryError);
      expect((err as Error).message)
        .to.include('9999_from_the_future')
        .and.include('newer Strata');
      expect(await schemaCatalog(sql)).to.deep.equal(before);
    });
  });

  it('refuses a pre-baseline history with a version no build recorded, and changes nothing in it', async () => {
    await withDatabase(async (sql) => {
      await migrateAsBuild(sql, builds[4]!);
      await sql.exec("INSERT INTO schema_migrations (version) VALUES ('0015_never_released')");
      const before = await schemaCatalog(sql);
      const err = await migrate(sql).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(SchemaHistoryError);
      expect((err as Error).message)
        .to.include('0015_never_released')
        .and.not.include('0001_object_store');
      expect(await schemaCatalog(sql)).to.deep.equal(before);
      expect(await recordedVersions(sql)).to.include('0001_object_store');
    });
  });
});
