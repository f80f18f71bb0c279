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
  new ChainRun(handlers, req, res, onError).next();
}

/** One request's way through a chain. (Its `next` is bound once: no closures made per handler or request beyond it.) */
class ChainRun<Req extends http.IncomingMessage> {
  private i = 0;
  readonly next: Next;
  readonly fail: (err: unknown) => void;

  constructor(
    private readonly handlers: readonly ChainHandler<Req>[],
    private readonly req: Req,
    private readonly res: http.ServerResponse,
    private readonly onError: ChainErrorHandler<Req>,
  ) {
    this.next = this.step.bind(this);
    this.fail = this.failWith.bind(this);
  }

  private step(err?: unknown): void {
    if (err !== undefined && err !== null) {
      this.failWith(err);
      return;
    }
    const handler = this.handlers[this.i++];
    if (!handler) return;
    try {
      const result = handler(this.req, this.res, this.next);
      if (result && typeof (result as Promise<unknown>).then === 'function') (result as Promise<unknown>).then(undefined, this.fail);
    } catch (thrown) {
      this.failWith(thrown);
    }
  }

  // An error handler that throws itself has nothing left to answer with: the connection is cut, and nothing
  // escapes as an unhandled rejection.
  private failWith(err: unknown): void {
    try {
      this.onError(err ?? new Error('rejected without a reason'), this.req, this.res, () => undefined);
    } catch {
      this.res.destroy();
    }
  }
}

/** A JSON answer (UTF-8, with its length), as Express's res.json writes it, for handlers on Node's response. */
export function sendJson(res: http.ServerResponse, body: unknown, status = res.statusCode): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
