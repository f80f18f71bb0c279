import { decodeStatementResult, encodeStatement } from './pglite-wire.js';
import type { SqlClient, SqlExecutor } from './sql.js';
import { runTransaction } from './sql-transaction.js';

/** A PGlite instance, wherever it runs (this event loop or its own thread); it handles one call at a time, in order. */
export interface PgliteBackend {
  /** Protocol messages in, the backend's answer out (PGlite's execProtocolRaw). */
  run(messages: Uint8Array): Promise<Uint8Array>;
  /** A script of one or more statements without parameters (simple protocol). */
  exec(script: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The SqlClient of a PGlite backend. Each statement is one extended-protocol exchange (pglite-wire.ts).
 *
 * PGlite has one session: while a transaction is open, only its own statements may reach the
 * backend. Other statements wait for it to end; transactions queue behind each other.
 */
export function pgliteSqlClient(backend: PgliteBackend, onClose: () => Promise<void> = async () => undefined): SqlClient {
  const direct: SqlExecutor = {
    query: async <R>(text: string, params?: unknown[]) => decodeStatementResult<R>(await backend.run(encodeStatement(text, params))),
    exec: (script) => backend.exec(script),
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
      await outside(() => backend.close()).catch(() => undefined);
      await onClose();
    },
  };
}

/** A backend on this event loop: calls run one after another, as on the thread. */
export function inLoopBackend(db: {
  execProtocolRaw(messages: Uint8Array): Promise<Uint8Array>;
  exec(script: string): Promise<unknown>;
  close(): Promise<void>;
}): PgliteBackend {
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const result = chain.then(fn);
    chain = result.catch(() => undefined);
    return result;
  };
  return {
    run: (messages) => serial(() => db.execProtocolRaw(messages)),
    exec: (script) => serial(async () => void (await db.exec(script))),
    close: () => serial(() => db.close()),
  };
}
