import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createPgliteSqlClient, type Registry, type SqlClient } from '../../images/service-kit/src/index.js';

/** What the PGlite thread's next WAL sync does while the trigger file holds it: fail with EIO, or end the thread. */
export type SyncFault = 'fail' | 'exit';

/**
 * A PGlite database on disk (`dir`/db) on its own thread, whose WAL syncs (the asynchronous fdatasync the
 * durable file layer runs after a writing statement) meet `fault` while `dir`/sync-fault names it.
 * `reopenDelaysMs`: how soon it is opened again after its thread stopped (pglite-recovery.ts); `registry` counts it.
 */
export function pgliteWithSyncFaults(dir: string, opts: { reopenDelaysMs?: { first: number; max: number }; registry?: Registry } = {}): Promise<SqlClient> {
  const trigger = path.join(dir, 'sync-fault');
  const faultPrelude = `
    const fs = require('node:fs');
    const fdatasync = fs.fdatasync;
    fs.fdatasync = function (fd, cb) {
      const fault = fs.existsSync(${JSON.stringify(trigger)}) ? fs.readFileSync(${JSON.stringify(trigger)}, 'utf8') : '';
      if (fault === 'exit') process.exit(3);
      if (fault === 'fail') return setImmediate(() => cb(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })));
      return fdatasync.call(fs, fd, cb);
    };`;
  return createPgliteSqlClient(path.join(dir, 'db'), { thread: true, faultPrelude, ...opts });
}

/** The fault each WAL sync of `pgliteWithSyncFaults(dir)` meets from now on (none: syncs work again). */
export async function injectSyncFault(dir: string, fault: SyncFault | 'none'): Promise<void> {
  const trigger = path.join(dir, 'sync-fault');
  if (fault === 'none') await rm(trigger, { force: true });
  else await writeFile(trigger, fault);
}
