import http from 'node:http';
import type { Readable } from 'node:stream';
import { handOverBody, InProcessAgent, servedInProcess } from '../../../service-kit/src/index.js';
import { readAnswer, S3Error, type AnswerSchema, type Cancellation, type S3ErrorCode } from '../../../object-model/src/index.js';
import { upstreamFailure } from '../flow-control/breakers.js';
import { ConnectionQueue } from './connection-queue.js';

export type { Cancellation };

/** Runs one upstream call (e.g. through a circuit breaker: the upstream's, or its `scope`'s, such as a bucket's). */
export type Guard = <R>(fn: () => Promise<R>, scope?: string) => Promise<R>;

/** Connections the gateway opens to one internal service, per kind (calls, uploads). */
const MAX_SOCKETS = 512;

/**
 * Bodies of at least this many bytes (declared) go to a service of this process by reference
 * (handOverBody: no HTTP framing, parsing and copying of each chunk on the way); smaller ones through
 * the in-memory connection as before.
 */
const HANDOVER_MIN_BYTES = 1024 * 1024;

/** The error a cancelled call fails with (as Node's for an aborted signal). */
function cancelledError(): Error {
  return Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' });
}

/** Query values; undefined ones are left out. */
export type Query = Record<string, string | number | boolean | undefined>;

export interface StreamCall {
  method: string;
  path: string;
  query?: Query;
  headers?: http.OutgoingHttpHeaders;
  /** Request body piped upstream; when absent the request is ended at once. */
  body?: Readable;
  /** Trailers sent after the body (which then goes chunked: no Content-Length with it). */
  trailers?: () => http.OutgoingHttpHeaders;
  /** Ends the upstream exchange when it fires (e.g. when the client went away). */
  cancellation?: Cancellation;
  /** The breaker scope of the call (the bucket): failures for one never open the circuit for another. */
  scope?: string;
}

/** Status → code for error answers that carry no JSON body (HEAD, or a proxy in between). */
const CODE_BY_STATUS: Record<number, S3ErrorCode> = {
  400: 'InvalidRequest',
  401: 'AccessDenied',
  403: 'AccessDenied',
  404: 'NoSuchKey',
  409: 'InvalidRequest',
  411: 'MissingContentLength',
  412: 'PreconditionFailed',
  416: 'InvalidRange',
  503: 'ServiceUnavailable',
  507: 'InsufficientStorage',
};

/**
 * An internal call's connection may be silent this long (a long compose or copy answers only at its
 * end, and a client reading slowly pauses a GET's stream); past it the peer counts as stalled.
 */
export const DEFAULT_INTERNAL_IDLE_TIMEOUT_MS = 120_000;

/**
 * The one way the gateway talks to an internal service: HTTP/1.1 over a keep-alive agent, the
 * internal token on every call, JSON error bodies turned back into S3Error so codes survive the hop.
 */
export class InternalHttp {
  // In the standalone process the data and control planes answer in-process (no loopback socket).
  private readonly agent: InProcessAgent;
  /** Calls wait for one of the agent's connections here, outside the breaker (connection-queue.ts). */
  private readonly queue: ConnectionQueue;
  /**
   * Calls that stream a client's body up hold their connection as long as that client takes: they get
   * connections of their own, so uploads in progress never leave reads waiting for one.
   */
  private readonly uploadAgent: InProcessAgent;
  private readonly base: URL;

  /**
   * `guard` runs calls through a circuit breaker (flow control). Uploads are not guarded: their
   * answer comes only after the whole body went up, which no upstream timeout should cut.
   * `idleTimeoutMs`: a call whose connection moves no byte either way this long (connecting included)
   * fails with ServiceUnavailable, counted against the upstream: a stalled peer never holds a request.
   * `maxConnections`: connections per kind (calls, uploads); calls past it wait in a queue.
   */
  constructor(
    baseUrl: string,
    private readonly token: string,
    private readonly service: string,
    private readonly guard: Guard = (fn) => fn(),
    private readonly idleTimeoutMs = DEFAULT_INTERNAL_IDLE_TIMEOUT_MS,
    maxConnections = MAX_SOCKETS,
  ) {
    this.base = new URL(baseUrl);
    this.agent = new InProcessAgent({ keepAlive: true, maxSockets: maxConnections, maxFreeSockets: 64 });
    this.uploadAgent = new InProcessAgent({ keepAlive: true, maxSockets: maxConnections, maxFreeSockets: 64 });
    this.queue = new ConnectionQueue(maxConnections, service);
  }

  /** Ends `req` with an error once its connection is idle for `idleTimeoutMs`; the timer goes with the request. */
  private timeIdle(req: http.ClientRequest): void {
    if (this.idleTimeoutMs <= 0 || req.destroyed) return;
    const onSocket = (socket: import('node:net').Socket) => {
      const onIdle = () => req.destroy(new Error(`no byte from or to ${this.service} for ${this.idleTimeoutMs} ms`));
      socket.setTimeout(this.idleTimeoutMs);
      socket.on('timeout', onIdle);
      // (Not req.setTimeout: its listener stays on a reused in-process connection.)
      req.once('close', () => {
        socket.off('timeout', onIdle);
        socket.setTimeout(0);
      });
    };
    if (req.socket) onSocket(req.socket);
    else req.once('socket', onSocket);
  }

  private target(path: string, query?: Query): string {
    const params = Object.entries(query ?? {})
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => (v === true ? encodeURIComponent(k) : `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`));
    return params.length ? `${path}?${params.join('&')}` : path;
  }

  /** Send a request and resolve with the response once its headers arrive (errors → S3Error). */
  async stream(call: StreamCall): Promise<http.IncomingMessage> {
    if (call.body) return this.send(call);
    const release = await this.queue.acquire(call.cancellation);
    let sent = false;
    try {
      return await this.guard(() => {
        sent = true;
        return this.send(call, release);
      }, call.scope);
    } catch (err) {
      // (A request that went out gives its place back when it closes, which a breaker's timeout does not wait for.)
      if (!sent) release();
      throw err;
    }
  }

  /**
   * Whether the call's body goes by reference (handOverBody): a large body of declared length, without
   * trailers (they follow the bytes), to a service of this process.
   */
  private handsOver(call: StreamCall): boolean {
    if (!call.body || call.trailers) return false;
    const declared = Number(call.headers?.['content-length']);
    return declared >= HANDOVER_MIN_BYTES && servedInProcess(this.base);
  }

  /** `release`: the call's place in the queue, given back once its exchange is over (its answer read or dropped). */
  private send(call: StreamCall, release?: () => void): Promise<http.IncomingMessage> {
    const handover = this.handsOver(call) ? handOverBody(call.body!) : undefined;
    let headers: http.OutgoingHttpHeaders = { ...call.headers, 'x-strata-internal-token': this.token };
    if (handover) {
      // The length travels beside a request of no bytes of its own.
      const { 'content-length': length, ...rest } = headers;
      headers = { ...rest, 'x-strata-content-length': length, [handover.header[0]]: handover.header[1] };
    }
    return new Promise((resolve, reject) => {
      const req = http.request({
        protocol: this.base.protocol,
        hostname: this.base.hostname,
        port: this.base.port,
        method: call.method,
        path: this.target(call.path, call.query),
        agent: call.body ? this.uploadAgent : this.agent,
        headers,
      });
      if (release) req.once('close', release);
      // (Not http.request's `signal`: an AbortSignal's listeners cost a noticeable share of a small PUT.)
      call.cancellation?.onCancel(() => req.destroy(cancelledError()));
      let bodyError: Error | undefined;
      let bodyDone = !call.body;
      let answeredEarly = false;
      req.on('error', (err) => reject(bodyError ?? this.unavailable(err)));
      req.on('response', (res) => {
        if (!bodyDone && call.body && !handover) {
          answeredEarly = true;
          // Answered before the whole body went up (instant hit, early error): stop sending; the
          // connection cannot be reused, so it is dropped once the answer is read.
          call.body.unpipe(req);
          res.once('end', () => req.destroy());
          res.once('close', () => req.destroy());
        }
        if ((res.statusCode ?? 500) < 400) {
          resolve(res);
          return;
        }
        this.readError(res).then(reject, reject);
      });
      if (call.body) {
        call.body.once('end', () => {
          bodyDone = true;
        });
        call.body.once('error', (err) => {
          bodyError = err;
          req.destroy(err);
        });
      }
      if (handover) {
        // No byte moves on the connection while the service reads the body itself: its idle time is
        // counted from the body's end (a silent client is the gateway's body timeouts' to end).
        req.once('close', handover.revoke);
        call.body!.once('end', () => this.timeIdle(req));
        req.end();
      } else if (call.body) {
        this.timeIdle(req);
        if (call.trailers) {
          const trailers = call.trailers;
          call.body.once('end', () => {
            // (Not after an early answer: the request is dropped then, see above.)
            if (answeredEarly || req.destroyed) return;
            req.addTrailers(trailers() as Record<string, string>);
            req.end();
          });
          call.body.pipe(req, { end: false });
        } else {
          call.body.pipe(req);
        }
      } else {
        this.timeIdle(req);
        req.end();
      }
    });
  }

  /**
   * JSON in, JSON out: the answer is read by `answer` (internal-answers.ts), so one of another shape
   * fails as InternalError (counted against the upstream's breaker) instead of flowing on.
   * `long: true` for calls whose duration grows with object size (compose, copy): not timed by the breaker.
   * `scope`: the call's breaker scope (see StreamCall).
   */
  async json<T>(
    method: string,
    path: string,
    answer: AnswerSchema<T>,
    opts: { query?: Query; body?: unknown; headers?: http.OutgoingHttpHeaders; long?: boolean; scope?: string } = {},
  ): Promise<T> {
    const release = await this.queue.acquire();
    try {
      const call = () => this.sendJson(method, path, answer, opts);
      return opts.long ? await call() : await this.guard(call, opts.scope);
    } finally {
      release();
    }
  }

  private async sendJson<T>(
    method: string,
    path: string,
    answer: AnswerSchema<T>,
    opts: { query?: Query; body?: unknown; headers?: http.OutgoingHttpHeaders },
  ): Promise<T> {
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({
        protocol: this.base.protocol,
        hostname: this.base.hostname,
        port: this.base.port,
        method,
        path: this.target(path, opts.query),
        agent: this.agent,
        headers: {
          ...opts.headers,
          'x-strata-internal-token': this.token,
          ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}),
        },
      });
      this.timeIdle(req);
      req.on('error', (err) => reject(this.unavailable(err)));
      req.on('response', resolve);
      req.end(payload);
    });
    if ((res.statusCode ?? 500) >= 400) throw await this.readError(res);
    return this.readAnswer(res, answer, `${method} ${path}`);
  }

  /** A JSON answer's body, read by `answer`; not JSON or not its shape: InternalError naming the call. */
  async readAnswer<T>(res: http.IncomingMessage, answer: AnswerSchema<T>, call: string): Promise<T> {
    const text = await readText(res);
    const what = `the ${this.service} (${call})`;
    let value: unknown;
    try {
      value = text ? JSON.parse(text) : undefined;
    } catch {
      throw new S3Error('InternalError', `${what} gave an answer that is not JSON`);
    }
    return readAnswer(answer, value, what);
  }

  private unavailable(err: Error): Error {
    if (err.name === 'AbortError') return err;
    return upstreamFailure(new S3Error('ServiceUnavailable', `${this.service} is unreachable: ${err.message}`));
  }

  private async readError(res: http.IncomingMessage): Promise<S3Error> {
    const status = res.statusCode ?? 500;
    const text = await readText(res).catch(() => '');
    try {
      const parsed = JSON.parse(text) as unknown;
      if (parsed && typeof parsed === 'object' && 'error' in parsed) return S3Error.fromJSON(parsed, status);
    } catch {
      // not JSON: fall through to the status mapping
    }
    if (status === 401) return new S3Error('InternalError', `${this.service} refused the internal token`);
    return new S3Error(CODE_BY_STATUS[status] ?? 'InternalError', text || undefined);
  }

  close(): void {
    this.agent.destroy();
    this.uploadAgent.destroy();
  }
}

export async function readText(res: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Keys travel as one path segment: encodeURIComponent of the whole key (ADR 0001). */
export function seg(value: string): string {
  return encodeURIComponent(value);
}
