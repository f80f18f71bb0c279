import type { Socket } from 'node:net';
import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import type { Counter } from 'prom-client';
import { deferredCounts, pooledRandomBytes, type Logger } from '../../../service-kit/src/index.js';
import { ClientGone, rawTarget, state } from '../context.js';

export interface TrafficCounters {
  bytesIn: Counter<'operation'>;
  bytesOut: Counter<'operation'>;
}

/**
 * First middleware of every request: request id (x-amz-request-id on every answer), cancellation
 * tied to the client connection, byte counters and one structured log line when the answer is done.
 */
/** Per connection: the socket's byte counts when its last request ended. */
const socketMarks = new WeakMap<Socket, { read: number; written: number }>();

/** 16 random hex digits, as S3's x-amz-request-id. */
export function newRequestId(): string {
  return pooledRandomBytes(8).toString('hex').toUpperCase();
}

/**
 * The JSON routes (POST /login, everything under /admin) answer every error as JSON, those met at the
 * edge too (a bad target, a timed-out body, a flow-control refusal, auth); the rest is S3's, in XML.
 */
function answersJson(req: http.IncomingMessage): boolean {
  const { path } = rawTarget(req);
  return path.startsWith('/admin/') || (path === '/login' && req.method === 'POST');
}

/** When a request began (performance.now()), and its connection's socket as it was then. */
const STARTED = Symbol('strata.request-started');
const SOCKET = Symbol('strata.request-socket');
type ContextResponse = http.ServerResponse & { [STARTED]?: number; [SOCKET]?: Socket };

export function requestContext(logger: Logger, counters: TrafficCounters) {
  // Added up here, handed to the counters when they are read: no label hashing per request.
  const countIn = deferredCounts(counters.bytesIn, 'operation');
  const countOut = deferredCounts(counters.bytesOut, 'operation');
  // One listener for every response (no closure per request): what it needs rides on the response.
  const requestDone = (res: ContextResponse) => {
    const req = res.req;
    const st = state(res);
    // The socket taken when the request began: by its close, `req.socket` may be gone (a destroyed connection).
    const socket = res[SOCKET]!;
    let connection = socketMarks.get(socket);
    if (connection === undefined) socketMarks.set(socket, (connection = { read: 0, written: 0 }));
    if (!res.writableFinished) st.clientGone.fire();
    st.bytesIn = Math.max(0, socket.bytesRead - connection.read);
    st.bytesOut = Math.max(0, socket.bytesWritten - connection.written);
    connection.read = socket.bytesRead;
    connection.written = socket.bytesWritten;
    countIn(st.operation, st.bytesIn);
    countOut(st.operation, st.bytesOut);
    if (!logger.isLevelEnabled('info')) return;
    const ms = performance.now() - res[STARTED]!;
    logger.info(
      {
        reqId: st.requestId,
        op: st.operation,
        method: req.method,
        path: rawTarget(req).path,
        status: res.statusCode,
        ms: Math.round(ms * 10) / 10,
        in: st.bytesIn,
        out: st.bytesOut,
        user: st.caller?.username,
        ...(res.writableFinished ? {} : { aborted: true }),
      },
      'request',
    );
  };
  function onClose(this: ContextResponse) {
    requestDone(this);
  }
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next) => {
    const requestId = newRequestId();
    (res as ContextResponse)[STARTED] = performance.now();
    const st = state(res);
    st.requestId = requestId;
    st.operation = 'Unknown';
    st.errorFormat = answersJson(req) ? 'json' : 'xml';
    st.bytesIn = 0;
    st.bytesOut = 0;
    st.clientGone = new ClientGone();
    res.setHeader('x-amz-request-id', requestId);
    res.setHeader('x-amz-id-2', requestId);
    res.setHeader('Server', 'Strata');
    // Bytes are counted on the socket (headers included) so that no listener changes the body stream.
    // Node has usually read a small request whole before this runs, so a request's bytes are counted
    // from where the previous request on the same connection ended, not from now.
    (res as ContextResponse)[SOCKET] = req.socket;
    if (!socketMarks.has(req.socket)) socketMarks.set(req.socket, { read: 0, written: 0 });
    res.on('close', onClose);
    next();
  };
}
