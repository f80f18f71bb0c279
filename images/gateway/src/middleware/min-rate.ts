import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import { timeOutBody, type RenderError } from './body-timeout.js';

export interface TransferRate {
  /** 0: no minimum. */
  minBytesPerSecond: number;
  windowMs: number;
}

/** What the minimum rate cut: a request body, or an answer its client did not read. */
export type SlowTransfer = 'slow-body' | 'slow-reader';

/** The byte counters of a connection (a TCP socket has them; an in-process pipe does not). */
type Counted = { bytesRead?: number; bytesWritten?: number; writableLength?: number };

/**
 * A minimum transfer rate, as nginx's send_timeout and Apache's mod_reqtimeout MinRate: over each
 * window (the rate in force when the request came), a connection that moves fewer than
 * minBytesPerSecond × windowMs / 1000 bytes while the gateway waits on its client ends the request.
 * - A request body (the gateway reading, nothing of it waiting unread): 400 RequestTimeout and the
 *   connection closed, as for a silent body (body-timeout.ts), so a body trickled a byte at a time
 *   holds its upload slot and upstream connection for one window, not for as long as it likes; the
 *   rest of a body answered early (a refusal) is held to the same rate, its connection closed.
 * - An answer (the gateway's writes waiting for the client to read): the connection is closed, which
 *   ends the upstream read it streams; what is buffered for it is bounded by the stream's high-water
 *   mark (pipeline's backpressure), so a client that does not read holds neither memory nor a read
 *   slot beyond one window.
 * Waiting on an upstream (nothing to send yet, or a body not being read) is never the client's fault.
 */
export function minTransferRate(rate: () => TransferRate, render: RenderError, onCut: (res: http.ServerResponse, what: SlowTransfer) => void) {
  // One watch per connection, kept across its requests (keep-alive): a request re-arms its timer instead of making one.
  const watches = new WeakMap<CountedSocket, ConnectionWatch>();
  const cut = (watch: ConnectionWatch, req: http.IncomingMessage, res: WatchedResponse, what: SlowTransfer) => {
    watch.stop(res);
    onCut(res, what);
    if (what === 'slow-body') timeOutBody(req, res, render, watch.windowMs);
    else watch.socket.destroy();
  };
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next): void => {
    const { minBytesPerSecond, windowMs } = rate();
    const socket = req.socket as CountedSocket | null;
    if (minBytesPerSecond <= 0 || !socket || socket.bytesRead === undefined || socket.bytesWritten === undefined) {
      next();
      return;
    }
    let watch = watches.get(socket);
    if (watch === undefined || watch.windowMs !== windowMs) {
      watch?.close();
      watch = new ConnectionWatch(socket, windowMs, cut);
      watches.set(socket, watch);
    }
    watch.start(req, res as WatchedResponse, (minBytesPerSecond * windowMs) / 1000);
    // Timed until the answer is sent and the body has come whole (the rest of a body answered early
    // included), or the connection is gone (seen at the next tick). (Not a 'close' listener: a piped
    // answer has ten already. `on`: a response finishes at most once.)
    res.on('finish', answered);
    next();
  };
}

/** The byte counters of a connection (a TCP socket has them; an in-process pipe does not). */
type CountedSocket = NonNullable<http.IncomingMessage['socket']> & Counted;
const WATCH = Symbol('strata.min-rate-watch');
type WatchedResponse = http.ServerResponse & { [WATCH]?: ConnectionWatch };

/** A watched answer is sent: its request is no longer timed once its body has come whole. */
function answered(this: WatchedResponse): void {
  const watch = this[WATCH];
  if (watch === undefined) return;
  const req = this.req;
  if (req.complete) watch.stop(this);
  else req.once('end', () => watch.stop(this));
}

/**
 * The minimum rate on one connection, for the request it serves now: over each window from the request's
 * start (the timer is re-armed per request, not made anew), the bytes it moved while the gateway waited
 * on its client.
 */
class ConnectionWatch {
  private req: http.IncomingMessage | undefined;
  private res: WatchedResponse | undefined;
  private least = 0;
  private read = 0;
  private written = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly socket: CountedSocket,
    readonly windowMs: number,
    private readonly cut: (watch: ConnectionWatch, req: http.IncomingMessage, res: WatchedResponse, what: SlowTransfer) => void,
  ) {
    this.timer = setInterval(() => this.tick(), windowMs).unref();
    socket.once('close', () => this.close());
  }

  start(req: http.IncomingMessage, res: WatchedResponse, least: number): void {
    this.req = req;
    this.res = res;
    res[WATCH] = this;
    this.least = least;
    this.read = this.socket.bytesRead ?? 0;
    this.written = this.socket.bytesWritten ?? 0;
    this.timer.refresh();
  }

  /** `res` is no longer timed (a later request on the connection may be). */
  stop(res: WatchedResponse): void {
    if (this.res !== res) return;
    this.req = undefined;
    this.res = undefined;
  }

  close(): void {
    clearInterval(this.timer);
    this.req = undefined;
    this.res = undefined;
  }

  private tick(): void {
    const { socket, req, res } = this;
    if (socket.destroyed) return this.close();
    if (req === undefined || res === undefined) return;
    const readNow = socket.bytesRead ?? this.read;
    const writtenNow = socket.bytesWritten ?? this.written;
    const [inWindow, outWindow] = [readNow - this.read, writtenNow - this.written];
    [this.read, this.written] = [readNow, writtenNow];
    // (A body is waited for when none of it waits unread and its reader is not holding it back, as a
    // pipe to a slow upstream does; after an early answer Node reads the rest itself.)
    if (!req.complete && req.readableLength === 0 && req.readableFlowing !== false && inWindow < this.least) {
      this.cut(this, req, res, 'slow-body');
      return;
    }
    const waitingForReader = res.headersSent && !res.writableFinished && (res.writableNeedDrain || (socket.writableLength ?? 0) > 0);
    if (waitingForReader && outWindow < this.least) this.cut(this, req, res, 'slow-reader');
  }
}
