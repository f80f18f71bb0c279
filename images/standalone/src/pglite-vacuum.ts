import type { Logger, SqlClient } from '../../service-kit/src/index.js';

/** How often the embedded database's tables are checked against the autovacuum thresholds, by default. */
export const DEFAULT_PGLITE_VACUUM_MS = 30_000;

/**
 * Tables past PostgreSQL's default autovacuum thresholds (autovacuum_vacuum_threshold 50 + scale 0.2,
 * autovacuum_vacuum_insert_threshold 1000 + 0.2, autovacuum_analyze_threshold 50 + 0.1, of the rows the
 * last VACUUM/ANALYZE counted). A partition due for ANALYZE brings its partitioned table (autovacuum
 * never analyzes those; plans over the whole table read their statistics).
 */
const DUE_TABLES = `
  WITH t AS (
    SELECT s.relid, s.n_dead_tup, s.n_ins_since_vacuum, s.n_mod_since_analyze, greatest(c.reltuples, 0) AS tuples
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE c.relkind = 'r'
  ), due AS (
    SELECT relid,
      n_dead_tup > 50 + 0.2 * tuples OR n_ins_since_vacuum > 1000 + 0.2 * tuples AS to_vacuum,
      n_mod_since_analyze > 50 + 0.1 * tuples AS to_analyze
    FROM t
  )
  SELECT relid::regclass::text AS name, to_vacuum, to_analyze, NULL::text AS parent FROM due WHERE to_vacuum OR to_analyze
  UNION
  SELECT DISTINCT NULL, false, true, pg_partition_root(relid)::regclass::text FROM due
  WHERE to_analyze AND pg_partition_root(relid) IS DISTINCT FROM relid`;

/**
 * PGlite runs PostgreSQL in single-user mode, where no autovacuum worker runs: the dead rows that
 * overwrites, reference-count updates and the outbox's sent marks leave behind would pile up for good
 * (tables and indexes only grow, scans slow down), and tables would have no planner statistics until
 * someone ran ANALYZE — without them PostgreSQL planned a batch of the lifecycle expiry as a nested loop
 * quadratic in the bucket's size (control-plane metadata/recycle-bin.ts, BATCH_ONCE). So the standalone platform does autovacuum's
 * job on a timer: each check reads the tables' change counters (pg_stat_user_tables) and runs
 * `VACUUM (ANALYZE)` or `ANALYZE` on the tables past autovacuum's default thresholds, and nothing when
 * none is. On the PGlite thread it delays statements, not requests that need none. Returns a function
 * that stops the timer and waits for a run in progress.
 */
export function startPgliteVacuum(sql: SqlClient, logger: Logger, everyMs = DEFAULT_PGLITE_VACUUM_MS): () => Promise<void> {
  let running: Promise<void> | undefined;
  const check = async () => {
    const started = performance.now();
    try {
      // The counters reach pg_stat_* once a transaction ends after a forced flush (single-user mode too).
      await sql.query('SELECT pg_stat_force_next_flush()');
      await sql.query('SELECT 1');
      const due = (await sql.query<{ name: string | null; to_vacuum: boolean; parent: string | null }>(DUE_TABLES)).rows;
      if (due.length === 0) return;
      const vacuumed = due.filter((t) => t.name && t.to_vacuum).map((t) => t.name!);
      const analyzed = due.filter((t) => (t.name && !t.to_vacuum) || t.parent).map((t) => (t.name ?? t.parent)!);
      if (vacuumed.length) await sql.exec(`VACUUM (ANALYZE) ${vacuumed.join(', ')}`);
      if (analyzed.length) await sql.exec(`ANALYZE ${[...new Set(analyzed)].join(', ')}`);
      logger.info({ ms: Math.round(performance.now() - started), vacuumed, analyzed }, 'embedded database vacuumed');
    } catch (err) {
      logger.warn({ err }, 'vacuuming the embedded database failed; will retry');
    }
  };
  const timer = setInterval(() => {
    running ??= check().finally(() => (running = undefined));
  }, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
