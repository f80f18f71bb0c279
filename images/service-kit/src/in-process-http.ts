import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { Duplex, type Readable } from 'node:stream';

/**
 * HTTP between services of one process without the kernel's sockets.
 *
 * In the standalone platform every service runs in one process and still talks to the others over
 * HTTP (the services know only each other's URLs). Over loopback TCP every byte of an object crosses
 * the kernel twice more than it must (a write into the socket, a read out of it) and pays TCP's
 * transmit and receive paths on the way (ADR 0002 has the cost). Here a service's server registers under its URL when it listens (`listen()` in
 * service.ts), and an `InProcessAgent` connects to such a server through a pair of in-memory streams
 * handed to it as a connection (Node's http server takes any Duplex as a connection): the same HTTP
 * requests and responses, parsed by the same code, with Buffers passed by reference. A target not
 * served by this process is reached over TCP as usual, so the agent is a drop-in for http.Agent.
 */

/** Servers of this process reachable in-process, by origin (`http://127.0.0.1:9001`). */
const servers = new Map<string, http.Server>();

/**
 * Make `server` reachable in-process at `origin` until the returned function is called (at the start
 * of its shutdown, so that new calls go to the — closed — TCP port and fail as they would anyway).
 */
export function serveInProcess(origin: string, server: http.Server): () => void {
  const key = new URL(origin).origin;
  servers.set(key, server);
  return () => {
    if (servers.get(key) === server) servers.delete(key);
  };
}

/** Whether in-process connections are on (`STRATA_IN_PROCESS_HTTP=0` turns them off, e.g. to compare). */
function enabled(): boolean {
  return process.env.STRATA_IN_PROCESS_HTTP !== '0';
}

/** The server of this process that answers at host:port, if any (a closed one does not: TCP then fails as it would). */
function serverAt(host: string | null | undefined, port: number | string | null | undefined): http.Server | undefined {
  if (!enabled() || servers.size === 0) return undefined;
  const h = host === 'localhost' ? '127.0.0.1' : host;
  const server = servers.get(`http://${h}:${port}`);
  return server?.listening ? server : undefined;
}

/** Whether `origin` is a server of this process, reached in-process. */
export function servedInProcess(origin: URL): boolean {
  return serverAt(origin.hostname, origin.port) !== undefined;
}

/**
 * Large request bodies handed over by reference to a server of this process. Sent through the
 * in-memory connection, every chunk of a body would be written by one HTTP stack and parsed (and copied)
 * again by the other, through four more streams; handed over, the server reads the sender's own stream.
 * The request then carries no body, only BODY_HANDOVER_HEADER naming the stream, which requestBody()
 * takes out of this map once (a name is 122 random bits, and only in-process connections are served
 * one, so no other caller can take another's body).
 */
const handedOver = new Map<string, Readable>();
export const BODY_HANDOVER_HEADER = 'x-strata-body-handover';

/** Hand `body` over to the request that carries `header`; `revoke()` once the request is over (a body never taken is dropped). */
export function handOverBody(body: Readable): { header: [string, string]; revoke(): void } {
  const id = randomUUID();
  handedOver.set(id, body);
  return { header: [BODY_HANDOVER_HEADER, id], revoke: () => handedOver.delete(id) };
}

/** The body of `req`: the stream its in-process sender handed over, else the request's own bytes. */
export function requestBody(req: http.IncomingMessage): Readable {
  const id = req.headers[BODY_HANDOVER_HEADER];
  if (typeof id !== 'string' || !(req.socket instanceof PipeEnd)) return req;
  const body = handedOver.get(id);
  if (!body) return req;
  handedOver.delete(id);
  return body;
}

/** A keep-alive http.Agent whose connections to a server of this process are in-memory pipes. */
export class InProcessAgent extends http.Agent {
  override createConnection(options: net.NetConnectOpts & { host?: string; port?: number }, callback?: (err: Error | null, socket: Duplex) => void): Duplex {
    const server = serverAt(options.host, options.port);
    if (!server) return net.createConnection(options, callback as () => void);
    const [client, serverSide] = pipePair();
    server.emit('connection', serverSide);
    return client;
  }
}

/**
 * One end of an in-memory connection: what one end writes, the other reads (the same Buffer, no
 * copy: a writer must not reuse a chunk it has written, which Node's HTTP code never does). A
 * chunk's write completes when the other end's reader has room for more (backpressure); destroying
 * one end closes the other, as a reset would.
 */
export class PipeEnd extends Duplex {
  peer!: PipeEnd;
  /** The write waiting for this end's reader to take more (backpressure). */
  private blockedWrite: ((err?: Error) => void) | undefined;
  // The socket API Node's HTTP code and its users touch.
  readonly remoteAddress = '127.0.0.1';
  readonly remoteFamily = 'IPv4';
  readonly remotePort = 0;
  readonly localAddress = '127.0.0.1';
  readonly localPort = 0;
  readonly connecting = false;
  private idleMs = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Chunks moved since the idle timer was armed; the timer fires only when none moved. */
  private activity = 0;
  private activitySeen = 0;

  constructor() {
    // Half-open like the sockets Node's HTTP server and client are built for: each ends its own side.
    super({ allowHalfOpen: true, highWaterMark: 1 << 20 });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.handOver([chunk], callback);
  }

  override _writev(chunks: Array<{ chunk: Buffer }>, callback: (err?: Error | null) => void): void {
    // Headers and body corked together by Node's HTTP code: handed over one by one, not concatenated.
    this.handOver(
      chunks.map((c) => c.chunk),
      callback,
    );
  }

  /** Push chunks to the peer's reader; the write completes now, or once that reader has room again. */
  private handOver(chunks: Buffer[], callback: (err?: Error | null) => void): void {
    this.activity++;
    if (this.peer.destroyed) {
      callback(resetError());
      return;
    }
    let room = true;
    for (const chunk of chunks) room = this.peer.push(chunk);
    if (room) callback();
    else this.peer.blockedWrite = callback;
  }

  override _final(callback: (err?: Error | null) => void): void {
    if (!this.peer.destroyed) this.peer.push(null);
    callback();
  }

  override _read(): void {
    this.activity++;
    const write = this.blockedWrite;
    if (write) {
      this.blockedWrite = undefined;
      write();
    }
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    clearTimeout(this.idleTimer);
    const write = this.blockedWrite;
    this.blockedWrite = undefined;
    // The peer's write into this end can no longer complete: it fails as a write into a reset socket.
    if (write) write(resetError());
    else if (!this.peer.destroyed) this.peer.destroy();
    callback(err);
  }

  setTimeout(ms: number, onTimeout?: () => void): this {
    if (onTimeout) this.once('timeout', onTimeout);
    this.idleMs = ms;
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (ms > 0) this.armIdleTimer();
    return this;
  }

  private armIdleTimer(): void {
    this.activitySeen = this.activity + this.peer.activity;
    this.idleTimer = setTimeout(() => {
      if (this.destroyed || this.idleMs === 0) return;
      if (this.activity + this.peer.activity !== this.activitySeen) this.armIdleTimer();
      else this.emit('timeout');
    }, this.idleMs).unref();
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  // A pipe holds no handle that keeps the event loop alive: nothing to ref or unref.
  ref(): this {
    return this;
  }

  unref(): this {
    return this;
  }

  address(): net.AddressInfo {
    return { address: this.localAddress, family: 'IPv4', port: this.localPort };
  }

  destroySoon(): void {
    if (this.writable) this.end();
    if (this.writableFinished) this.destroy();
    else this.once('finish', () => this.destroy());
  }
}

/** Two connected ends: [client, server]. */
export function pipePair(): [PipeEnd, PipeEnd] {
  const a = new PipeEnd();
  const b = new PipeEnd();
  a.peer = b;
  b.peer = a;
  return [a, b];
}

function resetError(): Error {
  return Object.assign(new Error('in-process connection closed by its peer'), { code: 'ECONNRESET' });
}
