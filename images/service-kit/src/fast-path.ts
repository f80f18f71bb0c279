import http from 'node:http';
import type { Express, NextFunction, Request, Response } from 'express';

/** Connect-style middleware or handler; may return a promise (a rejection is passed on as an error). */
export type ChainHandler = (req: Request, res: Response, next: NextFunction) => unknown;
export type ChainErrorHandler = (err: unknown, req: Request, res: Response, next: NextFunction) => void;

/**
 * Turn a raw request/response pair into Express's, as `app.handle` does before its router runs
 * (circular references, Express's prototypes, so `req.app`, `req.query`, `res.json`… behave as
 * usual, and `res.locals`) plus the router's `originalUrl`. The rest the router would add (`route`,
 * `params`) is the caller's to set.
 */
export function adoptRequest(app: Express, req: http.IncomingMessage, res: http.ServerResponse): { request: Request; response: Response } {
  const request = req as unknown as Request & { res: Response };
  const response = res as unknown as Response & { req: Request };
  request.res = response;
  response.req = request;
  // A no-op for the objects of a server made with expressServerOptions(app) (see there).
  Object.setPrototypeOf(req, app.request);
  Object.setPrototypeOf(res, app.response);
  response.locals ??= Object.create(null) as Response['locals'];
  request.originalUrl = req.url ?? '/';
  return { request, response };
}

/** Server options already made for an app (expressServerOptions is idempotent). */
const serverOptions = new WeakMap<Express, http.ServerOptions>();

/**
 * Options for `http.createServer` whose request and response objects are born with Express's API,
 * so that neither Express nor adoptRequest has to change their prototype per request.
 *
 * Express gives every request and response its own prototypes (`app.request`, `app.response`:
 * objects on top of its request/response objects on top of Node's) by swapping them after Node made
 * the objects; property lookups through that chain, on objects whose prototype changed after
 * creation, leave V8's inline caches megamorphic in Node's own HTTP code as much as in ours (the cost
 * is in hack/bench/measurements.md). Here the same properties (Express's, then the app's own) are
 * copied onto the prototypes of two classes that extend Node's, the app's `request`/`response`
 * become those prototypes, and Express's swap finds the prototype already in place (a no-op).
 * Call before the app serves its first request.
 */
export function expressServerOptions(app: Express): http.ServerOptions {
  const made = serverOptions.get(app);
  if (made) return made;
  class AppRequest extends http.IncomingMessage {}
  class AppResponse extends http.ServerResponse {}
  adoptPrototype(AppRequest.prototype, app.request);
  adoptPrototype(AppResponse.prototype, app.response);
  app.request = AppRequest.prototype as unknown as Express['request'];
  app.response = AppResponse.prototype as unknown as Express['response'];
  const options: http.ServerOptions = { IncomingMessage: AppRequest, ServerResponse: AppResponse as typeof http.ServerResponse };
  serverOptions.set(app, options);
  return options;
}

/**
 * Define on `target` every property that `source`'s chain adds above Node's own prototype (the one
 * `target` inherits from), nearest last, so that lookups resolve as they did through the chain.
 */
function adoptPrototype(target: object, source: object): void {
  const base = Object.getPrototypeOf(target) as object;
  const levels: object[] = [];
  for (let p: object | null = source; p && p !== base; p = Object.getPrototypeOf(p) as object | null) levels.unshift(p);
  for (const level of levels) {
    for (const key of Reflect.ownKeys(level)) {
      if (key !== 'constructor') Object.defineProperty(target, key, Object.getOwnPropertyDescriptor(level, key)!);
    }
  }
}

/**
 * Run `handlers` in order as Express would for one matched path: each calls `next()` to go on, and an
 * error (thrown, a rejected promise, or `next(err)`) goes to `onError` and ends the chain.
 */
export function runChain(handlers: readonly ChainHandler[], req: Request, res: Response, onError: ChainErrorHandler): void {
  let i = 0;
  const fail = (err: unknown) => onError(err ?? new Error('rejected without a reason'), req, res, () => undefined);
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

/**
 * A request listener that sends the requests `claim` accepts through `chain` without Express's router
 * (whose walk past every route and layer is a noticeable share of a small request's cost) and every
 * other request to `app`. `claim` returns what the router would have set for the request (its route
 * and params), or undefined to leave the request to Express. The result keeps `app.locals`, so the kit's
 * `listen()` can still mark the app as shutting down.
 */
export function withFastPath(
  app: Express,
  claim: (req: http.IncomingMessage) => { route?: { path: string }; params?: Record<string, string> } | undefined,
  chain: readonly ChainHandler[],
  onError: ChainErrorHandler,
): http.RequestListener & { locals: Express['locals']; app: Express } {
  const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const claimed = claim(req);
    if (!claimed) {
      app(req, res);
      return;
    }
    const { request, response } = adoptRequest(app, req, res);
    if (claimed.route) (request as Request & { route: unknown }).route = claimed.route;
    if (claimed.params) request.params = claimed.params;
    runChain(chain, request, response, onError);
  };
  return Object.assign(listener, { locals: app.locals, app });
}
