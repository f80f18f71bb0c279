import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { SqlClient, SqlExecutor, SqlResult } from './sql.js';
import { runTransaction } from './sql-transaction.js';

/**
 * Embedded PGlite on its own thread. PGlite runs every statement synchronously in WASM on the thread
 * that owns it; in `npm start` that was the one event loop serving every HTTP request too, and under a
 * write load about half of that thread went to PostgreSQL. Here the database runs on another core and
 * the event loop only posts messages. The thread is plain JavaScript (no loader needed) and answers
 * its messages in order, one at a time.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { PGlite } = require(workerData.entry);
const errorFields = (err) => {
  const out = { message: String(err && err.message || err), name: err && err.name };
  if (err && typeof err === 'object') for (const [k, v] of Object.entries(err)) if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[k] = v;
  return out;
};
(async () => {
  const db = await PGlite.create({ ...(workerData.dataDir ? { dataDir: workerData.dataDir } : {}), ...workerData.options });
  let chain = Promise.resolve();
  parentPort.on('message', (m) => {
    chain = chain.then(async () => {
      try {
        if (m.op === 'query') {
          const res = await db.query(m.text, m.params);
          parentPort.postMessage({ id: m.id, rows: res.rows, rowCount: res.affectedRows || res.rows.length });
        } else if (m.op === 'exec') {
          await db.exec(m.script);
          parentPort.postMessage({ id: m.id, rows: [], rowCount: 0 });
        } else if (m.op === 'close') {
          await db.close();
          parentPort.postMessage({ id: m.id, rows: [], rowCount: 0 });
        }
      } catch (err) {
        parentPort.postMessage({ id: m.id, error: errorFields(err) });
      }
    });
  });
  parentPort.postMessage({ ready: true });
})().catch((err) => parentPort.postMessage({ failed: errorFields(err) }));
`;

type Reply = { id: number; rows: unknown[]; rowCount: number } | { id: number; error: Record<string, unknown> } | { ready: true } | { failed: Record<string, unknown> };

/** The thread's error as an Error with PostgreSQL's fields (code, detail, ...) as own properties. */
function toError(fields: Record<string, unknown>): Error {
  return Object.assign(new Error(String(fields.message)), fields);
}

/**
 * A SqlClient whose PGlite lives on a worker thread. `dataDir` is a directory that already holds a
 * cluster (see createPgliteSqlClient), or undefined for an in-memory database.
 *
 * PGlite has one session: while a transaction is open, only its own statements may reach the
 * thread. Other statements wait for it to end; transactions queue behind each other.
 */
export async function startPgliteThread(dataDir: string | undefined, options: { postgresqlconf: string[] }): Promise<SqlClient> {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  // A small young generation: the thread only allocates messages and rows.
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { entry, dataDir, options }, resourceLimits: { maxYoungGenerationSizeMb: 4 } });
  const pending = new Map<number, { resolve: (r: SqlResult<unknown>) => void; reject: (err: Error) => void }>();
  let nextId = 1;
  let broken: Error | undefined;

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
    broken ??= err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  worker.on('message', (m: Reply) => {
    if (!('id' in m)) return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if ('error' in m) p.reject(toError(m.error));
    else p.resolve({ rows: m.rows, rowCount: m.rowCount });
  });
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the PGlite thread exited (${code})`)));

  const send = <R>(message: { op: 'query'; text: string; params?: unknown[] } | { op: 'exec'; script: string } | { op: 'close' }): Promise<SqlResult<R>> => {
    if (broken) return Promise.reject(broken);
    const id = nextId++;
    return new Promise<SqlResult<R>>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (r: SqlResult<unknown>) => void, reject });
      worker.postMessage({ id, ...message });
    });
  };
  const direct: SqlExecutor = {
    query: (text, params) => send({ op: 'query', text, params }),
    exec: async (script) => {
      await send({ op: 'exec', script });
    },
  };

  // The open transaction, if any: statements from outside it wait for it (`idle` resolves when it ends).
  let idle: Promise<void> = Promise.resolve();
  let inTransaction = false;
  const outside = async <T>(run: () => Promise<T>): Promise<T> => {
    while (inTransaction) await idle;
    return run();
  };
  let closed = false;

  return {
    kind: 'pglite',
    query: (text, params) => (inTransaction ? outside(() => direct.query(text, params)) : direct.query(text, params)),
    exec: (script) => outside(() => direct.exec(script)),
    async transaction(fn) {
      while (inTransaction) await idle;
      inTransaction = true;
      let end: () => void = () => undefined;
      idle = new Promise<void>((resolve) => (end = resolve));
      try {
        return await runTransaction(direct, fn);
      } finally {
        inTransaction = false;
        end();
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await outside(() => send({ op: 'close' })).catch(() => undefined);
      await worker.terminate();
    },
  };
}
