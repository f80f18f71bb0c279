import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger, SqlClient, SqlExecutor } from '../../../service-kit/src/index.js';

const SCHEMA_DIR = path.dirname(fileURLToPath(import.meta.url));
const MIGRATIONS_DIR = path.join(SCHEMA_DIR, 'migrations');
const FUNCTIONS_DIR = path.join(SCHEMA_DIR, 'functions');

/** The first versioned migration: a database that records others but not this one has another history. */
export const BASELINE_VERSION = '0001_baseline';

/** Any fixed number: every process that migrates this schema serialises on it. */
const MIGRATION_LOCK_KEY = 0x5354_5241; // "STRA"

/** The prefix of every stored function the schema defines; functions/ holds all of them. */
const FUNCTION_PREFIX = 'strata_';

/**
 * Apply the versioned `migrations/NNNN_name.sql` files (tables and indexes) not yet recorded in
 * `schema_migrations`, in file-name order, then define the stored functions again from `functions/`:
 * every `strata_` function is dropped and each file run, so the folder is the whole truth (a changed
 * signature needs no DROP of the old one, a removed file removes its function). All of it runs in one
 * transaction under a transaction-scoped advisory lock, so two processes starting at once neither race
 * nor apply a file twice, and callers see the old functions or the new ones, never none. Returns the
 * versions applied now.
 *
 * A database whose recorded versions lack the baseline was made by another history (before the
 * migrations were squashed into the baseline, nothing released): it is refused with what to do, never
 * migrated on guesses.
 */
export async function migrate(sql: SqlClient, logger?: Logger): Promise<string[]> {
  const versions = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  const functions = (await readdir(FUNCTIONS_DIR)).filter((f) => f.startsWith(FUNCTION_PREFIX) && f.endsWith('.sql')).sort();
  return sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const done = new Set((await tx.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    if (done.size > 0 && !done.has(BASELINE_VERSION)) throw new SchemaHistoryError([...done].sort());
    const applied: string[] = [];
    for (const file of versions) {
      const version = file.replace(/\.sql$/, '');
      if (done.has(version)) continue;
      await tx.exec(await readFile(path.join(MIGRATIONS_DIR, file), 'utf8'));
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

/** The database records migrations of another history than this build's baseline. */
export class SchemaHistoryError extends Error {
  constructor(readonly recorded: string[]) {
    super(
      `the database records schema versions ${recorded.join(', ')} but not ${BASELINE_VERSION}: it was made by a ` +
        'Strata from before the migrations were squashed into one baseline, and this build does not upgrade it. ' +
        'Start on an empty database: for the embedded default, move the data directory (STRATA_DATA_DIR, ' +
        'default ./data) away; on PostgreSQL, create a new database (or drop and re-create the schema).',
    );
    this.name = 'SchemaHistoryError';
  }
}
