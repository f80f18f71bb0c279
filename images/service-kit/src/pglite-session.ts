import { decodeAnswer, encodeClose, encodeStatement, type NamedStatement } from './pglite-wire.js';
import type { SqlClient, SqlExecutor, SqlResult } from './sql.js';
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
  const statements = new PreparedStatements(backend);
  const direct: SqlExecutor = {
    query: (text, params) => statements.query(text, params),
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

/** Most statement texts kept prepared; beyond them statements go unnamed (parsed and planned each time). */
const MAX_PREPARED = 256;
/** "cached plan must not change result type": a prepared statement's columns changed under it (DDL). */
const CACHED_PLAN_CHANGED = '0A000';

/**
 * Statements prepared once per session and then only bound and executed. PGlite parses, analyses and
 * plans an unnamed statement anew each time, which for the statements a small PUT sends (the batch
 * commit, the outbox relay's two, the event consumer's) cost about as much as running them. PostgreSQL
 * re-plans a prepared statement by itself when the schema changes under it.
 *
 * A text is parsed under a name by the first call that meets it; calls meanwhile go unnamed. Only a
 * Parse that succeeded (ParseComplete in the answer) makes the name usable, so a statement that fails
 * to parse (an unknown function, say) is parsed again next time.
 */
class PreparedStatements {
  private readonly names = new Map<string, { name: string; ready: boolean }>();
  private next = 0;

  constructor(private readonly backend: PgliteBackend) {}

  async query<R>(text: string, params?: unknown[]): Promise<SqlResult<R>> {
    const known = this.names.get(text);
    let named: NamedStatement | undefined;
    if (known?.ready) named = { name: known.name, parse: false };
    else if (!known && this.names.size < MAX_PREPARED) {
      named = { name: `strata_s${this.next++}`, parse: true };
      this.names.set(text, { name: named.name, ready: false });
    }
    const { result, error, parsed } = decodeAnswer<R>(await this.backend.run(encodeStatement(text, params, named)));
    if (named?.parse) {
      if (parsed) this.names.set(text, { name: named.name, ready: true });
      else this.names.delete(text);
    }
    if (!error) return result;
    if (named && !named.parse && error.code === CACHED_PLAN_CHANGED) {
      // Its result columns changed (DDL since it was prepared): drop it and run the text afresh.
      this.names.delete(text);
      await this.backend.run(encodeClose(named.name));
      return this.query(text, params);
    }
    throw error;
  }
}
