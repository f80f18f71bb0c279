import type { SqlExecutor } from './sql.js';

/** `fn` between BEGIN and COMMIT on one session; ROLLBACK (and the error) when it throws. */
export async function runTransaction<T>(session: SqlExecutor, fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
  await session.query('BEGIN');
  try {
    const result = await fn(session);
    await session.query('COMMIT');
    return result;
  } catch (err) {
    await session.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
