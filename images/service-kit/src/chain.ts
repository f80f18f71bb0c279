import type http from 'node:http';

/** Passes control to the next handler of a chain; with an error, to the chain's error handler. */
export type Next = (err?: unknown) => void;
/**
 * Connect-style middleware or handler over Node's own request and response (which Express's extend, so
 * an Express app can mount it too); it may return a promise, whose rejection is passed on as an error.
 */
export type ChainHandler<Req extends http.IncomingMessage = http.IncomingMessage> = (req: Req, res: http.ServerResponse, next: Next) => unknown;
export type ChainErrorHandler<Req extends http.IncomingMessage = http.IncomingMessage> = (err: unknown, req: Req, res: http.ServerResponse, next: Next) => void;

/**
 * Run `handlers` in order: each calls `next()` to go on, and an error (thrown, a rejected promise, or
 * `next(err)`) goes to `onError` and ends the chain. A chain that runs out ends there: its last handler answers.
 */
export function runChain<Req extends http.IncomingMessage>(
  handlers: readonly ChainHandler<Req>[],
  req: Req,
  res: http.ServerResponse,
  onError: ChainErrorHandler<Req>,
): void {
  let i = 0;
  // An error handler that throws itself has nothing left to answer with: the connection is cut, and nothing
  // escapes as an unhandled rejection.
  const fail = (err: unknown) => {
    try {
      onError(err ?? new Error('rejected without a reason'), req, res, () => undefined);
    } catch {
      res.destroy();
    }
  };
  const next = (err?: unknown): void => {
    if (err !== undefined && err !== null) {
      fail(err);
      return;
    }
    const handler = handlers[i++];
    if (!handler) return;
    try {
      const result = handler(req, res, next);
      if (result && typeof (result as Promise<unknown>).then === 'function') (result as Promise<unknown>).then(undefined, fail);
    } catch (thrown) {
      fail(thrown);
    }
  };
  next();
}

/** A JSON answer (UTF-8, with its length), as Express's res.json writes it, for handlers on Node's response. */
export function sendJson(res: http.ServerResponse, body: unknown, status = res.statusCode): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
