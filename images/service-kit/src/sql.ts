import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { inLoopBackend, pgliteSqlClient } from './pglite-session.js';
import { startPgliteThread } from './pglite-thread.js';
import { pgTypeParser } from './pglite-wire.js';
import { runTransaction } from './sql-transaction.js';

/** What a query answers: rows as plain objects; rowCount is the number of rows affected or returned. */
export interface SqlResult<R> {
  rows: R[];
  rowCount: number;
}

/** Runs one statement. Both a client and a transaction handle are executors. */
export interface SqlExecutor {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<SqlResult<R>>;
  /** Run a script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

/**
 * One SQL client shape over PostgreSQL (`pg.Pool`) and embedded PGlite, so that the same SQL and the
 * same migrations run on both. int8 values come back as numbers (sizes stay far below 2^53).
 * Inside `transaction(fn)` use only the given `tx`: PGlite has a single connection, so a query on
 * the client itself would wait for the transaction to end.
 */
export interface SqlClient extends SqlExecutor {
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /** "postgres" or "pglite", for logs and the rare dialect difference. */
  readonly kind: 'postgres' | 'pglite';
}

/** A pooled PostgreSQL client. `connectionString` as libpq understands it. */
export function createPgSqlClient(connectionString: string, opts: { max?: number } = {}): SqlClient {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    types: { getTypeParser: pgTypeParser as typeof pg.types.getTypeParser },
  });
  // An idle client that loses its server must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  const exec = async <R>(runner: pg.Pool | pg.PoolClient, text: string, params?: unknown[]): Promise<SqlResult<R>> => {
    const res = await runner.query(text, params as unknown[]);
    return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
  };
  return {
    kind: 'postgres',
    query: (text, params) => exec(pool, text, params),
    exec: async (script) => {
      await pool.query(script);
    },
    async transaction(fn) {
      const client = await pool.connect();
      try {
        const session: SqlExecutor = {
          query: (text, params) => exec(client, text, params),
          exec: async (script) => {
            await client.query(script);
          },
        };
        return await runTransaction(session, fn);
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}

/**
 * Embedded PostgreSQL (PGlite, WASM). `dataDir` is a directory on disk, or undefined / "memory://"
 * for an in-memory database. With `thread`, PGlite runs on a worker thread (pglite-thread.ts) instead
 * of this event loop, and on disk makes its commits and checkpoints durable (`fsync`, default true;
 * pglite-fsync.ts).
 */
export async function createPgliteSqlClient(dataDir?: string, opts: { thread?: boolean; fsync?: boolean } = {}): Promise<SqlClient> {
  // 16 MB of shared buffers instead of PostgreSQL's 128 MB: the pages live in WASM memory that is
  // never given back, and the metadata working set is small (the OS caches the files anyway).
  const options = { postgresqlconf: ['shared_buffers = 16MB'] };
  const onDisk = dataDir !== undefined && dataDir !== 'memory://';
  if (onDisk && !existsSync(path.join(dataDir, 'PG_VERSION'))) {
    // A new cluster: initdb runs in the same WASM memory and leaves it ~500 MB large for good (and a
    // closed instance's memory only goes back whenever V8 happens to collect it). So, like
    // PostgreSQL's own initdb, create the cluster in a short-lived child process, then open it here.
    await initPgliteCluster(dataDir, options.postgresqlconf);
  }
  if (opts.thread) return startPgliteThread(onDisk ? path.resolve(dataDir) : undefined, options, opts.fsync ?? true);
  const db = await PGlite.create({ ...(onDisk ? { dataDir } : {}), ...options });
  return pgliteSqlClient(inLoopBackend(db));
}

/** Create a PGlite cluster in `dataDir` from a child Node.js process (its memory goes with it). */
function initPgliteCluster(dataDir: string, postgresqlconf: string[]): Promise<void> {
  const script = [
    'const [entry, dir, conf] = process.argv.slice(1);',
    'const { PGlite } = require(entry);',
    '(async () => {',
    '  const db = await PGlite.create({ dataDir: dir, postgresqlconf: JSON.parse(conf) });',
    '  await db.close();',
    '})().catch((err) => { console.error(err); process.exit(1); });',
  ].join('\n');
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script, entry, path.resolve(dataDir), JSON.stringify(postgresqlconf)], { timeout: 300_000 }, (err, _stdout, stderr) =>
      err ? reject(new Error(`creating the PGlite database in ${dataDir} failed: ${err.message}\n${stderr}`)) : resolve(),
    );
  });
}

/** PostgreSQL's unique_violation, the same code on both clients. */
export function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === '23505';
}
