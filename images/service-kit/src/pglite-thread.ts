import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { DURABLE_FS_SOURCE, type DurabilityCounters } from './pglite-fsync.js';
import { pgliteSqlClient, type PgliteBackend } from './pglite-session.js';
import { asDatabaseUnavailable, DatabaseUnavailableError } from './sql-faults.js';
import type { SqlClient } from './sql.js';

/**
 * Embedded PGlite on its own thread. PGlite runs every statement synchronously in WASM on the thread
 * that owns it; in `npm start` that was the one event loop serving every HTTP request too, and under a
 * write load about half of that thread went to PostgreSQL. Here the database runs on another core and
 * the event loop only posts messages: protocol bytes in, the backend's answer out (encoded and decoded
 * on the event loop, pglite-wire.ts). The thread is plain JavaScript (no loader needed) and answers its
 * messages in order, one at a time. On disk, each answer is posted only once what it wrote is durable
 * (pglite-fsync.ts; the next message runs meanwhile).
 *
 * Once a statement is handed to the thread, only its answer says how it went. A failed WAL sync or the
 * thread's end comes after the statement may have run and committed in PGlite, so its outcome is unknown:
 * those are DatabaseUnavailableError, which commits decide (or leave undecided) and never count as failed.
 * After a failed sync the thread stops, as PostgreSQL PANICs on one: every statement from then on is
 * refused the same way (the data plane answers 503 and is not ready) until the database is opened again
 * on a new thread (pglite-recovery.ts does so by itself), whose recovery replays what the WAL on disk holds.
 */
const WORKER_SOURCE = `${DURABLE_FS_SOURCE}
const { parentPort, workerData } = require('node:worker_threads');
if (workerData.faultPrelude) new Function('require', workerData.faultPrelude)(require);
const durable = workerData.dataDir && workerData.fsync
  ? installDurableFs(require('node:fs'), require('node:path'), workerData.dataDir)
  : { answer: (ok) => ok(), syncAll: () => undefined, stats: undefined, failure: () => undefined };
// What an earlier process left in the page cache (the cluster its initdb wrote, say) reaches the disk first
// (syncfs through coreutils' sync; where there is none, the files PGlite writes from now on are still synced).
if (workerData.dataDir && workerData.fsync) {
  try {
    require('node:child_process').execFileSync('sync', ['-f', workerData.dataDir], { stdio: 'ignore' });
  } catch {}
}
const { PGlite } = require(workerData.entry);
const errorFields = (err) => {
  const out = { message: String(err && err.message || err), name: err && err.name };
  if (err && typeof err === 'object') for (const [k, v] of Object.entries(err)) if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[k] = v;
  return out;
};
(async () => {
  const { tarball, ...options } = workerData.options;
  const db = await PGlite.create({
    ...(workerData.dataDir ? { dataDir: workerData.dataDir } : { loadDataDir: new Blob([require('node:fs').readFileSync(tarball)]) }),
    ...options,
  });
  let chain = Promise.resolve();
  parentPort.on('message', (m) => {
    chain = chain.then(async () => {
      // A sync failed: this answer is not durable, and nothing runs any more (the thread is stopped).
      const halted = (err) => parentPort.postMessage({ id: m.id, error: errorFields(err), halted: true });
      if (durable.failure()) return halted(durable.failure());
      try {
        // Every answer goes out in order, once what came before it is durable (durable.answer).
        if (m.op === 'run') {
          // A fresh copy of the answer (not a view of WASM memory), so its buffer can be handed over.
          const answer = await db.execProtocolRaw(m.messages);
          durable.answer(() => parentPort.postMessage({ id: m.id, answer }, [answer.buffer]), halted);
        } else if (m.op === 'exec') {
          await db.exec(m.script);
          durable.answer(() => parentPort.postMessage({ id: m.id }), halted);
        } else if (m.op === 'close') {
          await db.close();
          durable.syncAll();
          durable.answer(() => parentPort.postMessage({ id: m.id }), halted);
        } else if (m.op === 'durability') {
          durable.answer(() => parentPort.postMessage({ id: m.id, stats: durable.stats && { ...durable.stats, events: [...durable.stats.events] } }), halted);
        }
      } catch (err) {
        // (In order too: answers of earlier exchanges may still wait for their sync.)
        durable.answer(() => parentPort.postMessage({ id: m.id, error: errorFields(err) }), halted);
      }
    });
  });
  parentPort.postMessage({ ready: true });
})().catch((err) => parentPort.postMessage({ failed: errorFields(err) }));
`;

type Reply =
  | { id: number; answer?: Uint8Array; stats?: DurabilityCounters }
  | { id: number; error: Record<string, unknown>; halted?: true }
  | { ready: true }
  | { failed: Record<string, unknown> };

/** The PGlite thread's SqlClient, and what its durable file layer has synced (undefined: in memory, or fsync off). */
export type PgliteThreadClient = SqlClient & { durability(): Promise<DurabilityCounters | undefined> };
/** One thread's client: `ended` resolves, with the reason, once the thread stopped answering (a failed sync, its end, close). */
export type PgliteThread = PgliteThreadClient & { readonly ended: Promise<Error> };

/**
 * The thread's error as an Error with PostgreSQL's fields (code, detail, ...) as own properties. One
 * without a SQLSTATE is not a statement's answer but PGlite or its files failing: DatabaseUnavailableError.
 */
function toError(fields: Record<string, unknown>): Error {
  return asDatabaseUnavailable(Object.assign(new Error(String(fields.message)), fields)) as Error;
}

/**
 * A SqlClient whose PGlite lives on a worker thread. `dataDir` is a directory that already holds a
 * cluster (see createPgliteSqlClient), or undefined for an in-memory database loaded from `options.tarball`
 * (a fresh cluster's, pglite-cluster.ts). `faultPrelude`: JavaScript the thread runs first, given `require`
 * (tests inject file-system faults with it).
 */
export async function startPgliteThread(
  dataDir: string | undefined,
  options: { postgresqlconf: string[]; tarball?: string },
  fsync = true,
  faultPrelude?: string,
): Promise<PgliteThread> {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  // A small young generation: the thread only allocates messages.
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { entry, dataDir, options, fsync, faultPrelude },
    resourceLimits: { maxYoungGenerationSizeMb: 4 },
  });
  type Answer = { answer?: Uint8Array; stats?: DurabilityCounters };
  const pending = new Map<number, { resolve: (reply: Answer) => void; reject: (err: Error) => void }>();
  let nextId = 1;
  let broken: Error | undefined;
  let onEnd: (err: Error) => void = () => undefined;
  const ended = new Promise<Error>((resolve) => (onEnd = resolve));

  await new Promise<void>((resolve, reject) => {
    const onExit = (code: number) => reject(new Error(`the PGlite thread exited while starting (${code})`));
    worker.once('exit', onExit);
    worker.once('error', reject);
    worker.once('message', (m: Reply) => {
      worker.off('exit', onExit);
      worker.off('error', reject);
      if ('ready' in m) resolve();
      else reject(toError('failed' in m ? m.failed : { message: 'unexpected first message from the PGlite thread' }));
    });
  }).catch(async (err: unknown) => {
    await worker.terminate();
    throw err;
  });

  const fail = (err: Error) => {
    if (!broken) onEnd(err);
    broken ??= err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  worker.on('message', (m: Reply) => {
    if (!('id' in m)) return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (!('error' in m)) return p.resolve(m);
    if (!m.halted) return p.reject(toError(m.error));
    // A failed sync stopped the thread: this and every statement after it are refused, and the thread ends.
    const { message, ...fields } = m.error;
    const halted = new DatabaseUnavailableError(Object.assign(new Error(`the PGlite thread stopped after a failed sync: ${String(message)}`), fields));
    p.reject(halted);
    fail(halted);
    void worker.terminate();
  });
  // Statements handed to a thread that ends have unknown outcomes.
  worker.on('error', (err) => fail(new DatabaseUnavailableError(err)));
  worker.on('exit', (code) => fail(new DatabaseUnavailableError(new Error(`the PGlite thread exited (${code})`))));

  const send = (message: { op: 'run'; messages: Uint8Array } | { op: 'exec'; script: string } | { op: 'close' } | { op: 'durability' }): Promise<Answer> => {
    if (broken) return Promise.reject(broken);
    const id = nextId++;
    return new Promise<Answer>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      // Protocol bytes are moved, not copied (encodeStatement gives each its own buffer).
      worker.postMessage({ id, ...message }, message.op === 'run' ? [message.messages.buffer as ArrayBuffer] : []);
    });
  };
  const backend: PgliteBackend = {
    run: async (messages) => (await send({ op: 'run', messages })).answer ?? new Uint8Array(0),
    exec: async (script) => void (await send({ op: 'exec', script })),
    close: async () => void (await send({ op: 'close' })),
  };
  const client = pgliteSqlClient(backend, async () => void (await worker.terminate()));
  return Object.assign(client, { durability: async () => (await send({ op: 'durability' })).stats, ended });
}
