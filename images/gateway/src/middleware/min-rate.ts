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
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next): void => {
    const { minBytesPerSecond, windowMs } = rate();
    const socket = req.socket as (http.IncomingMessage['socket'] & Counted) | null;
    if (minBytesPerSecond <= 0 || !socket || socket.bytesRead === undefined || socket.bytesWritten === undefined) {
      next();
      return;
    }
    const least = (minBytesPerSecond * windowMs) / 1000;
    let read = socket.bytesRead;
    let written = socket.bytesWritten;
    const timer = setInterval(() => {
      if (socket.destroyed) {
        clearInterval(timer);
        return;
      }
      const readNow = socket.bytesRead ?? read;
      const writtenNow = socket.bytesWritten ?? written;
      const [inWindow, outWindow] = [readNow - read, writtenNow - written];
      [read, written] = [readNow, writtenNow];
      // (A body is waited for when none of it waits unread and its reader is not holding it back, as a
      // pipe to a slow upstream does; after an early answer Node reads the rest itself.)
      if (!req.complete && req.readableLength === 0 && req.readableFlowing !== false && inWindow < least) {
        clearInterval(timer);
        onCut(res, 'slow-body');
        timeOutBody(req, res, render, windowMs);
        return;
      }
      const waitingForReader = res.headersSent && !res.writableFinished && (res.writableNeedDrain || (socket.writableLength ?? 0) > 0);
      if (waitingForReader && outWindow < least) {
        clearInterval(timer);
        onCut(res, 'slow-reader');
        socket.destroy();
      }
    }, windowMs);
    timer.unref();
    // Timed until the answer is sent and the body has come whole (the rest of a body answered early
    // included), or the connection is gone (seen at the next tick). (Not a 'close' listener: a piped
    // answer has ten already.)
    res.once('finish', () => {
      if (req.complete) clearInterval(timer);
      else req.once('end', () => clearInterval(timer));
    });
    next();
  };
}
