import { createHash, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import { env, isDatabaseUnavailable, sendJson, type Logger, type Next, type SlowClientOptions } from '../../service-kit/src/index.js';
import { S3Error } from './s3-errors.js';

/**
 * What the control plane and the data plane share on their internal HTTP APIs (ADR 0001): the
 * internal token check and the `{"error":{code,message,extra?}}` error answers the gateway turns
 * back into S3 errors.
 */

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Every internal call carries `x-strata-internal-token`; anything else is 401 (compared in constant time). */
export function requireInternalToken(token: string) {
  const expected = digest(token);
  return (req: http.IncomingMessage, _res: http.ServerResponse, next: Next) => {
    const given = req.headers['x-strata-internal-token'];
    if (typeof given !== 'string' || !given || !timingSafeEqual(digest(given), expected)) {
      next(new S3Error('Unauthorized', 'missing or wrong x-strata-internal-token'));
      return;
    }
    next();
  };
}

/**
 * The internal APIs' callers are the gateway and the control plane, which hold their own clients to 20 s
 * of silence: a request body that sends nothing for this long, or an answer its caller reads nothing of
 * for this long, means a caller that froze or a network that went quiet, and is ended with its connection
 * (a longer limit than the gateway's, so a stall of the service's own, such as a slow disk, is not taken
 * for the caller's before the gateway has judged its client).
 */
export const INTERNAL_IDLE_TIMEOUT_MS = 60_000;

/** The setting of both internal APIs' entrypoints (the data plane's and the control plane's). */
export const internalIdleEnv = {
  /** Silence, ms, after which an internal request body still arriving is refused 400 RequestTimeout, and an answer its caller reads nothing of is cut, each with its connection (0: no limit). */
  STRATA_INTERNAL_IDLE_TIMEOUT_MS: env.int(INTERNAL_IDLE_TIMEOUT_MS, 0, 3_600_000),
};

/**
 * The slow-client limits of an internal API (service-kit body-idle.ts, reader-idle.ts): a silent body is
 * answered S3's RequestTimeout in the internal error shape; 0 turns a limit off.
 */
export function internalSlowClients(opts: { bodyIdleTimeoutMs?: number; readerIdleTimeoutMs?: number }): SlowClientOptions {
  return {
    bodyIdleMs: opts.bodyIdleTimeoutMs ?? INTERNAL_IDLE_TIMEOUT_MS,
    readerIdleMs: opts.readerIdleTimeoutMs ?? INTERNAL_IDLE_TIMEOUT_MS,
    refuseSlowBody: (_req, res) => {
      const err = new S3Error('RequestTimeout');
      sendJson(res, err.toJSON(), err.status);
    },
  };
}

/** JSON in an internal header must be ASCII: non-ASCII characters travel as \u escapes. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A service's own mapping of an error it knows to an S3 error; undefined = not one of its own. */
export type ErrorMapping = (err: unknown, req: http.IncomingMessage) => S3Error | undefined;

/** The request target as received (Express's originalUrl where a router stripped its mount point). */
export function requestTarget(req: http.IncomingMessage & { originalUrl?: string }): string {
  return req.originalUrl ?? req.url ?? '/';
}

/** Renders errors as the internal API's `{"error":{code,message,extra?}}` with the S3 status. */
export function internalErrorHandler(logger: Logger, mapError: ErrorMapping = () => undefined) {
  return (err: unknown, req: http.IncomingMessage, res: http.ServerResponse, _next: Next) => {
    // The client went away mid-request: nobody is left to answer.
    if ((err as { code?: string }).code === 'ECONNRESET' || req.socket?.destroyed) {
      // Debug only: callers hang up at will (the gateway cancels for its own clients), no fault here.
      logger.debug({ method: req.method, url: requestTarget(req) }, 'client aborted the request');
      res.destroy();
      return;
    }
    const s3 =
      err instanceof S3Error
        ? err
        : (mapError(err, req) ?? bodyParserError(err) ?? storageFull(logger, err) ?? databaseUnavailable(logger, err) ?? unexpected(logger, err, req));
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // A body we stopped reading must not be drained: answer, then close the connection.
    if (!req.complete) res.setHeader('connection', 'close');
    sendJson(res, s3.toJSON(), s3.status);
  };
}

/** express.json()'s errors: bad JSON, too large, other 400s. */
function bodyParserError(err: unknown): S3Error | undefined {
  const type = (err as { type?: string }).type;
  if (type === 'entity.parse.failed') return new S3Error('InvalidArgument', 'the request body is not valid JSON');
  if (type === 'entity.too.large') return new S3Error('MaxMessageLengthExceeded');
  if ((err as { status?: number }).status === 400) return new S3Error('InvalidArgument', (err as Error).message);
  return undefined;
}

/**
 * The disk or quota under the service is full (ENOSPC, EDQUOT): 507, which names the cause; nothing
 * about the request was wrong, and a 500 would read as a bug. Writers remove their partial files.
 */
function storageFull(logger: Logger, err: unknown): S3Error | undefined {
  const code = storageFullCode(err);
  if (!code) return undefined;
  logger.warn({ err }, 'storage full');
  return new S3Error('InsufficientStorage', `The storage volume is full (${code}); free space or raise the quota, then retry.`);
}

/** ENOSPC or EDQUOT when `err` (or an error it wraps as its cause) says the disk or quota is full. */
export function storageFullCode(err: unknown): 'ENOSPC' | 'EDQUOT' | undefined {
  for (let e = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ENOSPC' || code === 'EDQUOT') return code;
  }
  return undefined;
}

/** The database cannot answer now: 503, which clients retry (and which no gateway breaker counts). */
function databaseUnavailable(logger: Logger, err: unknown): S3Error | undefined {
  if (!isDatabaseUnavailable(err)) return undefined;
  logger.warn({ err }, 'database unavailable');
  return new S3Error('ServiceUnavailable', 'The metadata database is unavailable; please retry.');
}

function unexpected(logger: Logger, err: unknown, req: http.IncomingMessage): S3Error {
  logger.error({ err, method: req.method, url: requestTarget(req) }, 'internal error');
  return new S3Error('InternalError');
}
