/**
 * The database cannot answer now (unreachable, frozen, shutting down, out of connections, too slow):
 * services answer 503 ServiceUnavailable, never 500. `code` is the original's (a SQLSTATE or a
 * socket error code), so callers that sort faults by it keep working.
 */
export class DatabaseUnavailableError extends Error {
  readonly code: string | undefined;
  constructor(cause: unknown) {
    super(`the database is unavailable: ${(cause as Error | null)?.message ?? String(cause)}`, { cause });
    this.name = 'DatabaseUnavailableError';
    this.code = (cause as { code?: unknown } | null)?.code as string | undefined;
  }
}

/**
 * Errors (node-postgres's, the PGlite thread's) about the connection, not the statement: no SQLSTATE (sockets,
 * connect and read timeouts, a connection ended), connection exceptions (08), operator intervention
 * (57P: shutdown, cannot connect now), too many connections (53300), statement timeout (57014).
 */
function isConnectionFault(err: unknown): boolean {
  if (err instanceof TypeError || err instanceof RangeError) return false;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '57014';
}

/** `err` as DatabaseUnavailableError when it is about the connection (isConnectionFault), else as it is. */
export function asDatabaseUnavailable(err: unknown): unknown {
  return isConnectionFault(err) ? new DatabaseUnavailableError(err) : err;
}

/** Whether `err` says the database cannot answer now (services answer 503). */
export function isDatabaseUnavailable(err: unknown): boolean {
  return err instanceof DatabaseUnavailableError;
}
