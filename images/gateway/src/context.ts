import type http from 'node:http';
import { requestTarget } from '../../object-model/src/index.js';
import type { KeyScope } from '../../object-model/src/index.js';
import type { SigV4Result } from './auth/sigv4-verify.js';
import type { Cancellation } from './clients/internal-http.js';

/** Who is calling, established by the auth middleware. */
export interface Caller {
  username: string;
  accessKey: string;
  /** Never for a scoped key, even one of the root's: a scoped key administers nothing. */
  isRoot: boolean;
  /** The caller signed with a scoped key: it acts as `username` within these limits (auth/key-scope.ts). */
  scope?: KeyScope;
  via: 'bearer' | 'sigv4' | 'presigned' | 'sigv2' | 'presigned-v2' | 'post-policy';
  sigv4?: SigV4Result;
}

/** Per-request state kept on the response (typed accessors, so handlers never cast). */
export interface RequestState {
  requestId: string;
  /** S3 operation name for metrics and logs, e.g. GetObject. */
  operation: string;
  /** How errors are rendered: S3 XML for S3 routes, JSON for /login, /admin and presign. */
  errorFormat: 'xml' | 'json';
  caller?: Caller;
  /** The client sent `Expect: 100-continue` and waits for `100 Continue` before sending its body. */
  expectsContinue?: boolean;
  /** The handler authenticates the request itself (a browser form upload's signed policy). */
  authenticatesItself?: boolean;
  /** The bucket and key the request names (decoded; empty when none), once it is routed. */
  bucket?: string;
  key?: string;
  /** The S3 error code the request was answered with, if any. */
  errorCode?: string;
  bytesIn: number;
  bytesOut: number;
  /** Fires when the client goes away before the answer is complete. */
  clientGone: ClientGone;
}

/**
 * The client went away before its answer was complete: upstream calls registered here are cancelled.
 * (An AbortController per request and http.request's listeners on its signal cost a noticeable share
 * of a small PUT; most requests never fire it.)
 */
export class ClientGone implements Cancellation {
  fired = false;
  private cancels: Array<() => void> | undefined;

  onCancel(cancel: () => void): void {
    if (this.fired) cancel();
    else (this.cancels ??= []).push(cancel);
  }

  fire(): void {
    if (this.fired) return;
    this.fired = true;
    const cancels = this.cancels;
    this.cancels = undefined;
    for (const cancel of cancels ?? []) cancel();
  }
}

const STATE = Symbol('strata.request-state');

/** The request's state (filled in by requestContext, the first middleware of every request). */
export function state(res: http.ServerResponse): RequestState {
  const holder = res as http.ServerResponse & { [STATE]?: RequestState };
  return (holder[STATE] ??= {} as RequestState);
}

/**
 * The request may send its body now: a client that asked (`Expect: 100-continue`) gets `100 Continue`
 * here, once, after its headers were authenticated, so that a refused client never sends its body.
 */
export function acceptBody(res: http.ServerResponse): void {
  const st = state(res);
  if (!st.expectsContinue) return;
  st.expectsContinue = false;
  if (!res.headersSent) res.writeContinue();
}

export function callerOf(res: http.ServerResponse): Caller {
  const c = state(res).caller;
  if (!c) throw new Error('caller not authenticated (auth middleware missing)');
  return c;
}

const TARGET = Symbol('strata.raw-target');
interface SplitTarget {
  readonly target: string;
  readonly path: string;
  readonly query: string;
}

/**
 * Raw path and query of the request as received (still percent-encoded). Split once per request and target
 * (several stages read it; the split is made again only when the target changes, e.g. under a mounted router).
 */
export function rawTarget(req: http.IncomingMessage): { readonly path: string; readonly query: string } {
  const url = requestTarget(req);
  const holder = req as http.IncomingMessage & { [TARGET]?: SplitTarget };
  const known = holder[TARGET];
  if (known !== undefined && known.target === url) return known;
  const q = url.indexOf('?');
  const split = q < 0 ? { target: url, path: url, query: '' } : { target: url, path: url.slice(0, q), query: url.slice(q + 1) };
  holder[TARGET] = split;
  return split;
}
