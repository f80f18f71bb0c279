import type { Logger, SqlClient } from '../../service-kit/src/index.js';

/** How often the embedded database is vacuumed, by default. */
export const DEFAULT_PGLITE_VACUUM_MS = 10 * 60_000;

/**
 * PGlite runs PostgreSQL in single-user mode, where no autovacuum worker runs: the dead rows that
 * overwrites, reference-count updates and the outbox's sent marks leave behind would pile up for
 * good (tables and indexes only grow, scans slow down). So the standalone platform runs
 * `VACUUM (ANALYZE)` itself on a timer; on the PGlite thread it delays statements, not requests that
 * need none. Returns a function that stops the timer and waits for a run in progress.
 */
export function startPgliteVacuum(sql: SqlClient, logger: Logger, everyMs = DEFAULT_PGLITE_VACUUM_MS): () => Promise<void> {
  let running: Promise<void> | undefined;
  const vacuum = async () => {
    const started = performance.now();
    try {
      await sql.exec('VACUUM (ANALYZE)');
      logger.info({ ms: Math.round(performance.now() - started) }, 'embedded database vacuumed');
    } catch (err) {
      logger.warn({ err }, 'vacuuming the embedded database failed; will retry');
    }
  };
  const timer = setInterval(() => {
    running ??= vacuum().finally(() => (running = undefined));
  }, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
