/**
 * Durable writes for PGlite on disk (the standalone platform's database).
 *
 * PostgreSQL makes a commit durable by fdatasync-ing its WAL before it answers, and makes a checkpoint
 * safe by fsync-ing the data files before it writes the new checkpoint's location into `pg_control`
 * (after which older WAL may be recycled). Compiled to WASM, every one of those calls is a no-op: the
 * emscripten syscalls answer 0 and its NODEFS has no fsync. A killed process loses nothing (the writes
 * are in the kernel's page cache), but a power loss or kernel crash could lose acknowledged commits, or
 * leave a checkpoint that points past data pages that never reached the disk.
 *
 * PGlite's NODEFS does its file I/O through Node's `fs` module (`openSync`, `writeSync`, `closeSync`,
 * `renameSync`, `ftruncateSync`), so the thread that runs it interposes on those before PGlite loads and
 * restores PostgreSQL's ordering from outside:
 * - the WAL files written by an exchange (a statement, a script) are fdatasync-ed, and directories whose
 *   entries changed (a new or renamed WAL segment) fsync-ed, before its answer is posted: an answered
 *   commit is on disk, as with PostgreSQL's default `synchronous_commit = on`. The syncs run off the
 *   thread (libuv's pool) while the next exchanges run, and answers wait for them in order — PostgreSQL's
 *   group commit: an answer goes out once a sync that started after its exchange's writes has finished,
 *   and so does every answer after it (a read must not show what is not yet durable). Under a write load
 *   the thread had spent about as long blocked in fdatasync as running statements;
 * - before `pg_control` is written (a checkpoint), every data file written since the last one is
 *   fdatasync-ed, and the WAL too; then `pg_control` itself is fsync-ed;
 * - a data file closed with unsynced writes is fdatasync-ed before it closes (its descriptor would be gone
 *   at the checkpoint);
 * - a failed sync is final, as PostgreSQL's PANIC on a failed fsync: the kernel may have dropped the
 *   writes it could not sync and marked them clean, so a later sync that succeeds proves nothing. The
 *   answers that waited for it fail, and so does every exchange after it (`failure()` says why); the
 *   database is to be opened again, which recovers from what the WAL on disk holds.
 *
 * The source below runs inside the worker (plain JavaScript, CommonJS); `installDurableFs` returns the
 * hook to call after each exchange and the counters the tests read.
 */
export const DURABLE_FS_SOURCE = `
function installDurableFs(fs, path, dataDir) {
  const original = { openSync: fs.openSync, closeSync: fs.closeSync, writeSync: fs.writeSync, renameSync: fs.renameSync, ftruncateSync: fs.ftruncateSync };
  const root = dataDir + path.sep;
  const walRoot = path.join(dataDir, 'pg_wal') + path.sep;
  const controlFile = path.join(dataDir, 'global', 'pg_control');
  const files = new Map();
  const walDirty = new Set();
  const dataDirty = new Set();
  const dirsDirty = new Set();
  const stats = { walSyncs: 0, dataSyncs: 0, dirSyncs: 0, controlSyncs: 0, events: [] };
  // The first sync that failed: from then on nothing is answered as durable.
  let failed;
  const synced = (sync) => {
    try {
      return sync();
    } catch (err) {
      failed ??= err;
      throw err;
    }
  };
  const note = (event) => {
    stats.events.push(event);
    if (stats.events.length > 64) stats.events.shift();
  };
  const inCluster = (p) => typeof p === 'string' && p.startsWith(root);
  const markWritten = (fd) => {
    const p = files.get(fd);
    if (p === undefined || p === controlFile) return;
    (p.startsWith(walRoot) ? walDirty : dataDirty).add(fd);
  };
  const syncEach = (fds, counter, event) => {
    for (const fd of fds) {
      fs.fdatasyncSync(fd);
      stats[counter]++;
    }
    if (fds.size) note(event);
    fds.clear();
  };
  // Answers waiting for a sync, in order; the WAL files and directories whose sync is running.
  const held = [];
  let inFlight;
  let inFlightDirs = [];
  // Files PGlite closed while their sync was running: closed when it has finished.
  const deferredClose = new Set();
  const syncData = () => syncEach(dataDirty, 'dataSyncs', 'data');
  const syncWal = () => {
    syncEach(walDirty, 'walSyncs', 'wal');
    for (const dir of dirsDirty) {
      let fd;
      try {
        fd = original.openSync.call(fs, dir, 'r');
      } catch (err) {
        if (err && err.code === 'ENOENT') continue; // removed since (a dropped database's directory)
        throw err;
      }
      try {
        fs.fsyncSync(fd);
        stats.dirSyncs++;
      } finally {
        original.closeSync.call(fs, fd);
      }
    }
    dirsDirty.clear();
  };
  /** Everything written so far on disk before this returns, the syncs running included (checkpoints, close). */
  const syncAll = () => {
    for (const fd of inFlight ?? []) fs.fdatasyncSync(fd);
    for (const dir of inFlightDirs) dirsDirty.add(dir);
    syncWal();
  };
  const fdatasyncAsync = (fd) => new Promise((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())));
  // A directory gone by the time it would be synced (a dropped database's) is skipped.
  const dirSyncAsync = (dir) =>
    new Promise((resolve, reject) =>
      fs.open(dir, 'r', (err, fd) => {
        if (err) return err.code === 'ENOENT' ? resolve(false) : reject(err);
        fs.fsync(fd, (syncErr) => fs.close(fd, () => (syncErr ? reject(syncErr) : resolve(true))));
      }),
    );
  const startSync = () => {
    const batch = held.splice(0);
    const fds = [...walDirty];
    walDirty.clear();
    inFlightDirs = [...dirsDirty];
    dirsDirty.clear();
    inFlight = new Set(fds);
    Promise.all([...fds.map(fdatasyncAsync), ...inFlightDirs.map(dirSyncAsync)])
      .then((done) => {
        stats.walSyncs += fds.length;
        stats.dirSyncs += done.slice(fds.length).filter(Boolean).length;
        if (fds.length) note('wal');
        return undefined;
      }, (err) => err)
      .then((err) => {
        for (const fd of inFlight) if (deferredClose.delete(fd)) original.closeSync.call(fs, fd);
        inFlight = undefined;
        inFlightDirs = [];
        if (err) failed ??= err;
        for (const h of batch) failed ? h.fail(failed) : h.ok();
        if (failed) for (const h of held.splice(0)) h.fail(failed);
        else if (held.length) startSync();
      });
  };
  /**
   * After an exchange: ok() once what it (and every exchange before it) wrote is durable — at once when
   * nothing is written or waiting; fail(err) when that sync, or any sync before, failed.
   */
  const answer = (ok, fail) => {
    if (failed) return fail(failed);
    if (!inFlight && !held.length && !walDirty.size && !dirsDirty.size) return ok();
    held.push({ ok, fail });
    if (!inFlight) startSync();
  };
  fs.openSync = function (p, flags) {
    const fd = original.openSync.apply(fs, arguments);
    if (inCluster(p)) {
      files.set(fd, p);
      if (typeof flags === 'number' && (flags & fs.constants.O_CREAT)) dirsDirty.add(path.dirname(p));
    }
    return fd;
  };
  fs.writeSync = function (fd) {
    const isControl = files.get(fd) === controlFile;
    // A checkpoint: what it covers must be on disk before pg_control says it happened.
    if (isControl) {
      synced(() => {
        syncData();
        syncAll();
      });
    }
    const written = original.writeSync.apply(fs, arguments);
    if (isControl) {
      synced(() => fs.fsyncSync(fd));
      stats.controlSyncs++;
      note('control');
    } else markWritten(fd);
    return written;
  };
  fs.ftruncateSync = function (fd) {
    const result = original.ftruncateSync.apply(fs, arguments);
    markWritten(fd);
    return result;
  };
  fs.closeSync = function (fd) {
    const dirty = walDirty.delete(fd) ? 'walSyncs' : dataDirty.delete(fd) ? 'dataSyncs' : undefined;
    if (dirty) {
      synced(() => fs.fdatasyncSync(fd));
      stats[dirty]++;
    }
    files.delete(fd);
    if (inFlight && inFlight.has(fd)) {
      deferredClose.add(fd);
      return undefined;
    }
    return original.closeSync.apply(fs, arguments);
  };
  fs.renameSync = function (from, to) {
    const result = original.renameSync.apply(fs, arguments);
    if (inCluster(to)) {
      dirsDirty.add(path.dirname(to));
      if (inCluster(from)) dirsDirty.add(path.dirname(from));
    }
    return result;
  };
  return { afterExchange: syncWal, answer, syncAll: () => synced(syncAll), stats, failure: () => failed };
}
`;

/** What the PGlite thread has synced so far (tests read it; `events` are the last kinds of sync in order). */
export interface DurabilityCounters {
  walSyncs: number;
  dataSyncs: number;
  dirSyncs: number;
  controlSyncs: number;
  events: Array<'wal' | 'data' | 'control'>;
}
