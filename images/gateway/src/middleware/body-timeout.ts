import type http from 'node:http';
import { timeOutBody as timeOut, watchBodyIdle, type Next, type RefuseSlowBody } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';

export { DEFAULT_BODY_IDLE_TIMEOUT_MS } from '../../../service-kit/src/index.js';

export type RenderError = (err: unknown, req: http.IncomingMessage, res: http.ServerResponse, next: Next) => void;

/** S3's answer to a body that is too slow: 400 RequestTimeout. */
function requestTimeout(render: RenderError): RefuseSlowBody {
  return (req, res) => render(new S3Error('RequestTimeout'), req, res, () => undefined);
}

/** End a request whose body is too slow with S3's RequestTimeout, and close its connection (service-kit's timeOutBody). */
export function timeOutBody(req: http.IncomingMessage, res: http.ServerResponse, render: RenderError, graceMs: number): void {
  timeOut(req, res, requestTimeout(render), graceMs);
}

/**
 * A request body that sends no byte for `idleMs` is answered S3's 400 RequestTimeout and its
 * connection closed, which ends whatever the request was streaming upstream (the upload is
 * cancelled as for a client that went away): see service-kit's watchBodyIdle. 0 turns the limit off.
 */
export function bodyIdleTimeout(idleMs: number, render: RenderError) {
  const refuse = requestTimeout(render);
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next): void => {
    watchBodyIdle(req, res, idleMs, refuse);
    next();
  };
}
