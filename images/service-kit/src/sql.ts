import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import type { Logger } from './logger.js';
import type { Registry } from './metrics.js';
import { createPgliteCluster, pristineClusterTarball } from './pglite-cluster.js';
import { inLoopBackend, pgliteSqlClient } from './pglite-session.js';
import { reopeningPglite } from './pglite-recovery.js';
import { startPgliteThread } from './pglite-thread.js';
import { pgTypeParser } from './pglite-wire.js';
import { asDatabaseUnavailable, DatabaseUnavailableError } from './sql-faults.js';
import { runTransaction } from './sql-transaction.js';

export { DatabaseUnavailableError, isDatabaseUnavailable } from './sql-faults.js';

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

/** How long a PostgreSQL client waits on its server (ms); 0 turns one off. */
export interface PgTimeouts {
  /** A new connection, or a free one from a full pool. */
  connectTimeoutMs?: number;
  /** A statement, on the server (`statement_timeout`: the server cancels it, the connection stays usable). */
  statementTimeoutMs?: number;
  /** A statement's answer, on the client: a frozen or silent server, which cannot cancel anything itself. */
  queryTimeoutMs?: number;
}

/**
 * Defaults: a frozen or unreachable primary is answered (503) within a few seconds; a statement that
 * runs longer than 4 s is a fault of its own in this metadata workload (migrations are not limited).
 */
export const PG_TIMEOUT_DEFAULTS: Required<PgTimeouts> = { connectTimeoutMs: 3_000, statementTimeoutMs: 4_000, queryTimeoutMs: 5_000 };

/** A migration's answer may take this long (a day: in effect no limit, but never forever). */
const MIGRATION_QUERY_TIMEOUT_MS = 24 * 3600_000;

/** A pooled PostgreSQL client. `connectionString` as libpq understands it. */
export function createPgSqlClient(connectionString: string, opts: { max?: number } & PgTimeouts = {}): SqlClient {
  const t = { ...PG_TIMEOUT_DEFAULTS, ...opts };
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    types: { getTypeParser: pgTypeParser as typeof pg.types.getTypeParser },
    ...(t.connectTimeoutMs > 0 ? { connectionTimeoutMillis: t.connectTimeoutMs } : {}),
    ...(t.statementTimeoutMs > 0 ? { statement_timeout: t.statementTimeoutMs } : {}),
    ...(t.queryTimeoutMs > 0 ? { query_timeout: t.queryTimeoutMs } : {}),
  });
  // An idle client that loses its server must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  const exec = async <R>(runner: pg.Pool | pg.PoolClient, text: string, params?: unknown[]): Promise<SqlResult<R>> => {
    try {
      const res = await runner.query(text, params as unknown[]);
      return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
    } catch (err) {
      throw asDatabaseUnavailable(err);
    }
  };
  /** A pooled client for `fn`; one whose connection failed is dropped, not given back. */
  const withClient = async <T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect().catch((err: unknown) => Promise.reject(asDatabaseUnavailable(err)));
    let failure: unknown;
    try {
      return await fn(client);
    } catch (err) {
      failure = err;
      throw err;
    } finally {
      client.release(failure instanceof DatabaseUnavailableError ? failure : undefined);
    }
  };
  /**
   * Scripts are migrations: no statement limit (a long index build is not a fault). In a transaction
   * the lifted limit ends with it; outside one it is reset before the connection goes back.
   */
  const runScript = async (client: pg.PoolClient, script: string, inTransaction: boolean): Promise<void> => {
    try {
      await client.query(inTransaction ? 'SET LOCAL statement_timeout = 0' : 'SET statement_timeout = 0');
      // (query_timeout per query is node-postgres's, missing from its types.)
      await client.query({ text: script, query_timeout: MIGRATION_QUERY_TIMEOUT_MS } as pg.QueryConfig);
      if (!inTransaction) await client.query('RESET statement_timeout');
    } catch (err) {
      throw asDatabaseUnavailable(err);
    }
  };
  return {
    kind: 'postgres',
    query: (text, params) => exec(pool, text, params),
    exec: (script) => withClient((client) => runScript(client, script, false)),
    transaction: (fn) =>
      withClient((client) =>
        runTransaction(
          {
            query: (text, params) => exec(client, text, params),
            exec: (script) => runScript(client, script, true),
          },
          fn,
        ),
      ),
    close: () => pool.end(),
  };
}

/**
 * Embedded PostgreSQL (PGlite, WASM). `dataDir` is a directory on disk, or undefined / "memory://"
 * for an in-memory database. With `thread`, PGlite runs on a worker thread (pglite-thread.ts) instead
 * of this event loop, and on disk makes its commits and checkpoints durable (`fsync`, default true;
 * pglite-fsync.ts; `faultPrelude`: startPgliteThread's) and is opened again after its thread stopped
 * (pglite-recovery.ts; `logger` and `registry` tell, `reopenDelaysMs` paces it).
 */
export async function createPgliteSqlClient(
  dataDir?: string,
  opts: {
    thread?: boolean;
    fsync?: boolean;
    faultPrelude?: string;
    logger?: Logger;
    registry?: Registry;
    reopenDelaysMs?: { first: number; max: number };
  } = {},
): Promise<SqlClient> {
  // 16 MB of shared buffers instead of PostgreSQL's 128 MB: the pages live in WASM memory that is
  // never given back, and the metadata working set is small (the OS caches the files anyway).
  const options = { postgresqlconf: ['shared_buffers = 16MB'] };
  const onDisk = dataDir !== undefined && dataDir !== 'memory://';
  // A new cluster is a copy of a pristine one (pglite-cluster.ts): initdb runs once per process.
  if (onDisk && !existsSync(path.join(dataDir, 'PG_VERSION'))) await createPgliteCluster(dataDir, options.postgresqlconf);
  const tarball = onDisk ? undefined : await pristineClusterTarball(options.postgresqlconf);
  if (opts.thread) {
    const start = () => startPgliteThread(onDisk ? path.resolve(dataDir) : undefined, { ...options, tarball }, opts.fsync ?? true, opts.faultPrelude);
    // On disk, a thread that stopped is replaced by one that recovers from the WAL (an in-memory one has nothing to recover).
    return onDisk ? reopeningPglite(start, await start(), { logger: opts.logger, registry: opts.registry, delaysMs: opts.reopenDelaysMs }) : start();
  }
  const db = await PGlite.create({ ...(onDisk ? { dataDir } : { loadDataDir: new Blob([await readFile(tarball!)]) }), ...options });
  return pgliteSqlClient(inLoopBackend(db));
}

/** PostgreSQL's unique_violation, the same code on both clients. */
export function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === '23505';
}
