import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger, SqlClient, SqlExecutor } from '../../../service-kit/src/index.js';

const SCHEMA_DIR = path.dirname(fileURLToPath(import.meta.url));
const MIGRATIONS_DIR = path.join(SCHEMA_DIR, 'migrations');
const FUNCTIONS_DIR = path.join(SCHEMA_DIR, 'functions');

/** The first versioned migration: every history since 0.2.0 starts with it. */
export const BASELINE_VERSION = '0001_baseline';

/**
 * The versions recorded by the builds before the baseline (0.1.0 and earlier), in the order they ran;
 * `pre-baseline.sql` brings a schema of any prefix of them to the baseline's tables.
 */
export const PRE_BASELINE_VERSIONS = [
  '0001_object_store',
  '0002_blobs_by_locator',
  '0003_commit_object_function',
  '0004_commit_objects_function',
  '0005_bucket_name_hold',
  '0006_inline_blobs',
  '0007_set_based_batch_commit',
  '0008_bucket_lifecycle',
  '0009_bucket_cors',
  '0010_bucket_tags',
  '0011_object_tags',
  '0012_object_headers',
  '0013_batch_commit_replaced_by_index',
  '0014_object_part_sizes',
] as const;
const PRE_BASELINE_FILE = path.join(SCHEMA_DIR, 'pre-baseline.sql');

/** Any fixed number: every process that migrates this schema serialises on it. */
const MIGRATION_LOCK_KEY = 0x5354_5241; // "STRA"

/** The prefix of every stored function the schema defines; functions/ holds all of them. */
const FUNCTION_PREFIX = 'strata_';

/** This build's migration versions (`migrations/NNNN_name.sql` without `.sql`), in the order they apply. */
export async function migrationVersions(): Promise<string[]> {
  return (await readdir(MIGRATIONS_DIR))
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f) => f.replace(/\.sql$/, ''));
}

/**
 * Apply the versioned `migrations/NNNN_name.sql` files (tables and indexes) not yet recorded in
 * `schema_migrations`, in file-name order, then define the stored functions again from `functions/`:
 * every `strata_` function is dropped and each file run, so the folder is the whole truth (a changed
 * signature needs no DROP of the old one, a removed file removes its function). All of it runs in one
 * transaction under a transaction-scoped advisory lock, so two processes starting at once neither race
 * nor apply a file twice, and callers see the old functions or the new ones, never none. Returns the
 * versions applied now.
 *
 * Every schema change is a new migration file; a shipped one is never edited, since databases that
 * recorded it keep what it did then. A database of a build from before the baseline (it records
 * PRE_BASELINE_VERSIONS) is first brought to the baseline by `pre-baseline.sql`, and its records are
 * replaced by the baseline's. A database recording a version this build does not have (made by a newer
 * build) is refused with a SchemaHistoryError, never migrated on guesses.
 */
export async function migrate(sql: SqlClient, logger?: Logger): Promise<string[]> {
  const versions = await migrationVersions();
  const functions = (await readdir(FUNCTIONS_DIR)).filter((f) => f.startsWith(FUNCTION_PREFIX) && f.endsWith('.sql')).sort();
  return sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const recorded = (await tx.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version);
    const applied: string[] = [];
    let done = new Set(recorded);
    if (done.size > 0 && !done.has(BASELINE_VERSION)) {
      const preBaseline: readonly string[] = PRE_BASELINE_VERSIONS;
      const foreign = recorded.filter((v) => !preBaseline.includes(v)).sort();
      if (foreign.length > 0 || !recorded.includes(preBaseline[0]!)) throw new SchemaHistoryError(foreign.length > 0 ? foreign : recorded.sort());
      await tx.exec(await readFile(PRE_BASELINE_FILE, 'utf8'));
      await tx.query('DELETE FROM schema_migrations WHERE version = ANY($1)', [recorded]);
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [BASELINE_VERSION]);
      done = new Set([BASELINE_VERSION]);
      applied.push(BASELINE_VERSION);
      logger?.info({ recorded: recorded.sort(), version: BASELINE_VERSION }, 'schema of a build before the baseline brought to it');
    }
    const known = new Set(versions);
    const unknown = [...done].filter((v) => !known.has(v)).sort();
    if (unknown.length > 0) throw new SchemaHistoryError(unknown);
    for (const version of versions) {
      if (done.has(version)) continue;
      await tx.exec(await readFile(path.join(MIGRATIONS_DIR, `${version}.sql`), 'utf8'));
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [version]);
      applied.push(version);
      logger?.info({ version }, 'migration applied');
    }
    await defineFunctions(tx, functions);
    return applied;
  });
}

async function defineFunctions(tx: SqlExecutor, files: string[]): Promise<void> {
  const existing = await tx.query<{ signature: string }>(
    `SELECT p.oid::regprocedure::text AS signature FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace AND starts_with(p.proname, $1)`,
    [FUNCTION_PREFIX],
  );
  for (const { signature } of existing.rows) await tx.exec(`DROP FUNCTION ${signature}`);
  for (const file of files) await tx.exec(await readFile(path.join(FUNCTIONS_DIR, file), 'utf8'));
}

/**
 * The database records schema versions this build does not know: made by a newer build (or a history
 * nothing maps onto the baseline). Nothing is changed in it.
 */
export class SchemaHistoryError extends Error {
  constructor(readonly unknown: string[]) {
    super(
      `the database records schema versions ${unknown.join(', ')} that this build does not know: it was made by a ` +
        'newer Strata (or by a history no release recorded). Start the release that made it, or a newer one: a ' +
        'build never migrates a schema backwards. CHANGELOG.md lists the releases and their upgrade notes.',
    );
    this.name = 'SchemaHistoryError';
  }
}
