import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger, SqlClient } from '../../../service-kit/src/index.js';

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/** Any fixed number: every process that migrates this schema serialises on it. */
const MIGRATION_LOCK_KEY = 0x5354_5241; // "STRA"

/**
 * Apply the versioned `migrations/NNNN_name.sql` files not yet recorded in `schema_migrations`, in
 * file-name order, all in one transaction under a transaction-scoped advisory lock, so that two
 * processes starting at once neither race nor apply a file twice. Returns the versions applied now.
 */
export async function migrate(sql: SqlClient, logger?: Logger): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  return sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const done = new Set((await tx.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    const applied: string[] = [];
    for (const file of files) {
      const version = file.replace(/\.sql$/, '');
      if (done.has(version)) continue;
      await tx.exec(await readFile(path.join(MIGRATIONS_DIR, file), 'utf8'));
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [version]);
      applied.push(version);
      logger?.info({ version }, 'migration applied');
    }
    return applied;
  });
}
