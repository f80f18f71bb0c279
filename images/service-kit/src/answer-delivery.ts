import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * Every answer reaches its client, in request order.
 *
 * - **Lingering close.** Closing a TCP connection while the client's bytes are still arriving (a body the
 *   answer refused before reading it) makes the kernel send a reset, and the client's stack then drops the
 *   answer it had not read yet. So a connection is closed as nginx's lingering close does: FIN after the
 *   answer, then the client's bytes are read and discarded until the client closes too, or it has sent
 *   nothing for LINGER_IDLE_MS, or LINGER_MAX_MS have passed.
 * - **Bounded drain.** An answer that goes out while its request's body is still arriving closes the
 *   connection (`Connection: close`, then the lingering close): the rest of the body is not read without
 *   bound to keep the connection.
 * - **No request after the last answer.** A request that arrives on a connection after an answer that ends
 *   it is not served: its answer could not be sent, so it must store nothing.
 * - **Malformed bytes wait their turn.** Node writes its 400 for bytes that are no valid HTTP straight on
 *   the socket, ahead of the answers to the requests before them that are still being served (the client
 *   then reads the 400 as their answer), and destroys the connection. Here the requests before them get
 *   their own answers first; then the 400 with `Connection: close`, and the lingering close.
 *
 * In-process connections (PipeEnd) cannot be reset: they keep Node's plain close.
 */

/** Silence from a client whose connection is closing, after which it is closed regardless. */
export const LINGER_IDLE_MS = 5_000;
/** The longest a closing connection keeps reading what its client still sends. */
export const LINGER_MAX_MS = 30_000;

/** Node's answers for bytes that are no valid request (the same as its own clientError defaults). */
const REFUSALS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout'],
};

interface Exchange {
  req: http.IncomingMessage;
  res: http.ServerResponse;
}

/** Whether body bytes of `req` are still to come from the client. */
export function bodyPending(req: http.IncomingMessage): boolean {
  if (req.complete) return false;
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

const EXCHANGES = Symbol('strata.exchanges');
type ListedResponse = http.ServerResponse & { [EXCHANGES]?: Exchange[] };

/** A response ended (or its client went away): its exchange leaves its connection's list. */
function exchangeDone(this: ListedResponse): void {
  const list = this[EXCHANGES];
  if (!list) return;
  const i = list.findIndex((e) => e.res === this);
  if (i >= 0) list.splice(i, 1);
}

/** Connections in their lingering close. */
const lingering = new WeakSet<net.Socket>();
/** Connections an answer ended (`Connection: close`): a request that follows on them is never answered. */
const closing = new WeakSet<Duplex>();

/**
 * The server's responses: one sent while its request's body is still arriving closes the connection. (Routes
 * served by Express get Express's response prototype instead: their small JSON bodies are read whole first.)
 */
export class DeliveredResponse<Request extends http.IncomingMessage = http.IncomingMessage> extends http.ServerResponse<Request> {
  /** When the answer's head was written (process.hrtime.bigint()): the time of its first byte, for access logs. */
  headWrittenAt: bigint | undefined = undefined;

  constructor(req: Request) {
    super(req);
    // Each stage that holds something for the answer's life (metrics, flow-control slots, timers, the access log,
    // the connection's exchange list) listens for its end once: about a dozen on a response, none added per chunk.
    this.setMaxListeners(32);
  }

  // writeHead is where Node fixes the Connection header (every answer passes here, implicit ones too).
  override writeHead(statusCode: number, statusMessage?: string, headers?: http.OutgoingHttpHeaders | http.OutgoingHttpHeader[]): this;
  override writeHead(statusCode: number, headers?: http.OutgoingHttpHeaders | http.OutgoingHttpHeader[]): this;
  override writeHead(statusCode: number, reasonOrHeaders?: unknown, headers?: unknown): this {
    this.headWrittenAt ??= process.hrtime.bigint();
    if (!this.headersSent && bodyPending(this.req)) this.shouldKeepAlive = false;
    // (Node's writeHead takes a missing reason or headers as undefined: no rest array per answer.)
    const self = (http.ServerResponse.prototype.writeHead as (...args: unknown[]) => this).call(this, statusCode, reasonOrHeaders, headers);
    // (A request whose connection is gone may have no socket left.)
    const socket = this.req.socket ?? this.socket;
    if (socket && (!this.shouldKeepAlive || closesConnection(this.getHeader('connection')))) closing.add(socket);
    return self;
  }
}

/** Whether a Connection header's value asks to close (none, the usual case: no text to test). */
function closesConnection(value: number | string | string[] | undefined): boolean {
  return value !== undefined && /\bclose\b/i.test(String(value));
}

/** FIN now (once written data is out), then discard what the client still sends, within the bounds above. */
function lingeringClose(socket: net.Socket): void {
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  if (socket.writable) socket.end();
  // The HTTP parser keeps consuming (and dropping) what arrives; when the client ends too, the socket
  // is destroyed on its own (both directions ended).
  socket.setTimeout(LINGER_IDLE_MS, () => socket.destroy());
  const cap = setTimeout(() => socket.destroy(), LINGER_MAX_MS).unref();
  socket.once('close', () => clearTimeout(cap));
}

/**
 * The server's connections and the requests each is serving, in order; installs the behaviour above on
 * `server` (create it with `ServerResponse: DeliveredResponse`).
 */
export class AnswerDelivery {
  private readonly exchanges = new Map<Duplex, Exchange[]>();
  private readonly refused = new WeakSet<Duplex>();

  constructor(server: http.Server) {
    server.on('connection', (socket: Duplex) => {
      this.exchanges.set(socket, []);
      socket.once('close', () => this.exchanges.delete(socket));
      // Node's http server closes with destroySoon() after an answer that ends the connection.
      if (socket instanceof net.Socket) socket.destroySoon = () => lingeringClose(socket);
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const list = this.exchanges.get(req.socket);
      if (!list) return;
      list.push({ req, res });
      // (One shared listener, no closure per request: it finds its exchange by the response. `on`, not `once`:
      // a response emits each of these at most once, and `once` would wrap the listener anew per request.)
      (res as ListedResponse)[EXCHANGES] = list;
      res.on('finish', exchangeDone);
      res.on('close', exchangeDone);
    });
    server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => this.refuse(err, socket));
  }

  /**
   * Whether `req` is to be served: not when an earlier answer on its connection ended the connection (its
   * own answer could never be sent, so it must change nothing); its bytes are then read and dropped.
   */
  serves(req: http.IncomingMessage): boolean {
    if (!closing.has(req.socket) && !(req.socket instanceof net.Socket && lingering.has(req.socket))) return true;
    req.resume();
    return false;
  }

  /** Each open connection and how many of its requests are being served. */
  *connections(): Iterable<[Duplex, number]> {
    for (const [socket, list] of this.exchanges) yield [socket, list.length];
  }

  /**
   * Bytes that are no valid request (or a connection error): the requests before them are answered
   * first, then the refusal, then the connection closes. The parser reports every later chunk again:
   * only the first report counts.
   */
  private refuse(err: Error & { code?: string }, socket: Duplex): void {
    if (this.refused.has(socket)) return;
    this.refused.add(socket);
    // A connection already closing after an answer (lingering) keeps discarding until its bounds.
    if (socket instanceof net.Socket && lingering.has(socket)) return;
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, text] = REFUSALS[err.code ?? ''] ?? [400, 'Bad Request'];
    const list = this.exchanges.get(socket) ?? [];
    // The request whose bytes broke off (its body will never arrive whole) is the one refused: it is last.
    const last = list.at(-1);
    const broken = last && !last.req.complete ? last : undefined;
    const before = broken ? list.slice(0, -1) : [...list];
    const close = () => {
      if (socket instanceof net.Socket) lingeringClose(socket);
      else socket.end();
    };
    const refuseNow = () => {
      // Gone, or closing after an answer that ended the connection: nothing more is said on it.
      if (socket.destroyed || !socket.writable) return;
      // The broken request's own answer, already under way, is let finish.
      if (broken?.res.headersSent) {
        broken.res.once('finish', close);
        return;
      }
      // Written as Node writes it, on the socket: a broken request's handler still waits for a body that never
      // comes whole, and the connection's close aborts it (its upload is cancelled, nothing is stored).
      socket.write(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      close();
    };
    const waiting = new Set(before.map((e) => e.res).filter((res) => !res.writableFinished));
    if (waiting.size === 0) return refuseNow();
    for (const res of waiting) {
      const answered = () => {
        if (waiting.delete(res) && waiting.size === 0) refuseNow();
      };
      res.once('finish', answered);
      res.once('close', answered);
    }
  }
}
