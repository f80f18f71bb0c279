import type { Logger } from './logger.js';
import { registeredCounter, type Registry } from './metrics.js';
import type { PgliteThread, PgliteThreadClient } from './pglite-thread.js';
import { DatabaseUnavailableError } from './sql-faults.js';

/**
 * The first wait before the database is opened again, and the longest (each failed try doubles it). A thread
 * that stops within `max` of its opening counts as a failed try too (the disk still failing on each write).
 */
export const REOPEN_DELAYS_MS = { first: 1_000, max: 30_000 };

/**
 * The embedded database on disk, opened again by itself after its thread stopped (a failed WAL sync, the
 * thread's end), as PostgreSQL's postmaster restarts its backends after a PANIC: opening runs PGlite's
 * crash recovery, which replays what the WAL on disk holds, so an answered commit is there and nothing the
 * failed sync may have lost is trusted. The old thread has ended before the new one opens the files (two
 * PGlite instances on one directory would corrupt it).
 *
 * Meanwhile every statement is refused as unavailable (services answer 503 and are not ready); statements
 * that were running on the stopped thread keep their own error (an unknown outcome). While opening fails,
 * or the new thread stops again (the disk still failing), each try waits twice as long, up to `max`.
 */
export function reopeningPglite(
  open: () => Promise<PgliteThread>,
  first: PgliteThread,
  opts: { logger?: Logger; registry?: Registry; delaysMs?: { first: number; max: number } } = {},
): PgliteThreadClient {
  const delays = opts.delaysMs ?? REOPEN_DELAYS_MS;
  // An operator alerts on these: each stop of the thread, and each try to open the database again, by outcome.
  const events =
    opts.registry &&
    registeredCounter(opts.registry, 'strata_embedded_database_restarts_total', "The embedded database's thread stopping, and its reopening, by outcome", [
      'event',
    ]);
  let current: PgliteThread | undefined;
  let stopped: PgliteThread | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let opening: Promise<void> = Promise.resolve();

  const watch = (client: PgliteThread, attempt: number) => {
    current = client;
    const openedAt = Date.now();
    void client.ended.then((err) => {
      if (closed || current !== client) return;
      current = undefined;
      stopped = client;
      events?.inc({ event: 'stopped' });
      // A thread that ran for a while starts the backoff afresh; one that stopped soon after opening continues it.
      const next = Date.now() - openedAt < delays.max ? attempt + 1 : 0;
      opts.logger?.error({ err, attempt: next + 1 }, 'the embedded database stopped; opening it again (recovery from its WAL)');
      schedule(next);
    });
  };
  const schedule = (attempt: number) => {
    const delay = Math.min(delays.first * 2 ** attempt, delays.max);
    timer = setTimeout(() => {
      timer = undefined;
      opening = reopen(attempt);
    }, delay);
    timer.unref?.();
  };
  const reopen = async (attempt: number) => {
    try {
      // The stopped thread is gone before its files are opened again.
      await stopped?.close().catch(() => undefined);
      stopped = undefined;
      if (closed) return;
      const client = await open();
      if (closed) return void (await client.close());
      watch(client, attempt);
      events?.inc({ event: 'reopened' });
      opts.logger?.warn({ attempt: attempt + 1 }, 'the embedded database is open again');
    } catch (err) {
      if (closed) return;
      events?.inc({ event: 'reopen_failed' });
      opts.logger?.error({ err, attempt: attempt + 1 }, 'the embedded database could not be opened again; trying later');
      schedule(attempt + 1);
    }
  };
  const live = (): PgliteThread => {
    if (current) return current;
    throw new DatabaseUnavailableError(
      new Error(closed ? 'the embedded database is closed' : 'the embedded database is being opened again after its thread stopped'),
    );
  };
  const onLive = <T>(run: (client: PgliteThread) => Promise<T>): Promise<T> => {
    try {
      return run(live());
    } catch (err) {
      return Promise.reject(err as Error);
    }
  };

  // The first thread counts as a try that worked long ago: its stop waits the first delay.
  watch(first, -1);
  return {
    kind: 'pglite',
    query: (text, params) => onLive((c) => c.query(text, params)),
    exec: (script) => onLive((c) => c.exec(script)),
    transaction: (fn) => onLive((c) => c.transaction(fn)),
    durability: () => onLive((c) => c.durability()),
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await opening;
      await stopped?.close().catch(() => undefined);
      await current?.close();
    },
  };
}
