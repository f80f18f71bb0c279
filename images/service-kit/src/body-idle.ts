import type http from 'node:http';
import { sendJson } from './chain.js';

/** A body that sends nothing for 20 s is refused (S3's own limit, which the gateway applies too). */
export const DEFAULT_BODY_IDLE_TIMEOUT_MS = 20_000;

/** Answers a request whose body went silent, in the service's own error shape (status 408 for the kit's services, S3's 400 for the gateway). */
export type RefuseSlowBody = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** The kit's default answer: `{"error":{"code":"request_timeout","message"}}` with 408. */
export const refuseSlowBodyJson: RefuseSlowBody = (_req, res) => {
  sendJson(res, { error: { code: 'request_timeout', message: 'The request body stopped arriving; send it whole and promptly.' } }, 408);
};

/**
 * End a request whose body is too slow: the service's answer, and the connection closed (whatever the
 * body fed is cancelled as for a client that went away). The answer may be stuck behind a client that
 * reads nothing either: the connection is closed after `graceMs` regardless.
 */
export function timeOutBody(req: http.IncomingMessage, res: http.ServerResponse, refuse: RefuseSlowBody, graceMs: number): void {
  // Answered already (refused before its body was read): the rest of the body is not coming.
  if (res.headersSent) {
    req.socket?.destroy();
    return;
  }
  res.setHeader('Connection', 'close');
  res.once('finish', () => req.socket?.destroy());
  refuse(req, res);
  setTimeout(() => req.socket?.destroy(), graceMs).unref();
}

/**
 * Times a request's body: one that sends no byte for `idleMs` is refused and its connection closed, so
 * a client that trickles a body, stops half-way or sends headers and never a body holds no connection,
 * handler or upstream call for longer than that (Node's own requestTimeout is off: long uploads are
 * fine while bytes flow). Requests whose body has arrived whole are not timed; 0 turns the limit off.
 */
export function watchBodyIdle(req: http.IncomingMessage, res: http.ServerResponse, idleMs: number, refuse: RefuseSlowBody): void {
  if (idleMs <= 0 || req.complete) return;
  // The socket's idle timer: reset by every byte either way (not a 'data' listener, which would take
  // the body out of the handler's hands).
  req.setTimeout(idleMs, () => {
    if (!req.complete) timeOutBody(req, res, refuse, idleMs);
  });
  req.once('end', () => req.setTimeout(0));
  // Answered before the body came whole (a refusal, an early error): Node keeps reading the rest to
  // reuse the connection, under its keep-alive timer; the idle limit applies to that rest as well.
  res.once('finish', () => {
    // (By then the connection may be gone: a request's socket is null once it is detached.)
    if (!req.complete) setImmediate(() => req.socket?.setTimeout(idleMs));
  });
}
