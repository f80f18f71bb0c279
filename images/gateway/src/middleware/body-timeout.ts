import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';

/** S3's: a body that sends nothing for 20 s is answered RequestTimeout. */
export const DEFAULT_BODY_IDLE_TIMEOUT_MS = 20_000;

export type RenderError = (err: unknown, req: http.IncomingMessage, res: http.ServerResponse, next: Next) => void;

/**
 * End a request whose body is too slow: S3's 400 RequestTimeout, and the connection closed (the
 * upload it fed is cancelled as for a client that went away). The answer may be stuck behind a
 * client that reads nothing either: the connection is closed after `graceMs` regardless.
 */
export function timeOutBody(req: http.IncomingMessage, res: http.ServerResponse, render: RenderError, graceMs: number): void {
  // Answered already (refused before its body was read): the rest of the body is not coming.
  if (res.headersSent) {
    req.socket?.destroy();
    return;
  }
  res.setHeader('Connection', 'close');
  res.once('finish', () => req.socket?.destroy());
  render(new S3Error('RequestTimeout'), req, res, () => undefined);
  setTimeout(() => req.socket?.destroy(), graceMs).unref();
}

/**
 * A request body that sends no byte for `idleMs` is answered S3's 400 RequestTimeout and its
 * connection closed, which ends whatever the request was streaming upstream (the upload is
 * cancelled as for a client that went away): a client that trickles a body, or stops half-way,
 * holds no connection, upstream socket or upload slot for longer than that. Requests whose body
 * has arrived whole (and those without one) are not timed; 0 turns the limit off.
 */
export function bodyIdleTimeout(idleMs: number, render: RenderError) {
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next): void => {
    if (idleMs <= 0 || req.complete) {
      next();
      return;
    }
    // The socket's idle timer: reset by every byte either way (not a 'data' listener, which would
    // take the body out of the handler's hands).
    req.setTimeout(idleMs, () => {
      if (!req.complete) timeOutBody(req, res, render, idleMs);
    });
    req.once('end', () => req.setTimeout(0));
    // Answered before the body came whole (a refusal, an early error): Node keeps reading the rest to
    // reuse the connection, under its keep-alive timer; the idle limit applies to that rest as well.
    res.once('finish', () => {
      // (By then the connection may be gone: a request's socket is null once it is detached.)
      if (!req.complete) setImmediate(() => req.socket?.setTimeout(idleMs));
    });
    next();
  };
}
