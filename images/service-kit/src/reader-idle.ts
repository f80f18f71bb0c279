import type http from 'node:http';

/** An answer that its client has not read for this long (nothing of it taken while it waits) is cut. */
export const DEFAULT_READER_IDLE_TIMEOUT_MS = 30_000;

/** The byte counter of a connection (a TCP socket has it; an in-process pipe does not). */
type Counted = { bytesWritten?: number; writableLength?: number; destroy(): void };

/**
 * Cuts the connection of a client that stops reading its answer: an answer waiting for its reader
 * (data buffered that the client does not take) that has moved no byte for `idleMs` (checked every
 * `idleMs`, so within two) ends with its connection, which also ends what streams it (a file read, a
 * generation). A reader that takes anything in the meantime is not cut, however slow; an answer that
 * waits on the service itself (nothing to send yet) is never the client's fault. 0 turns it off.
 * Answers the function that stops the watch.
 */
export function cutStalledReaders(server: http.Server, idleMs: number): () => void {
  if (idleMs <= 0) return () => undefined;
  /** Answers in progress, and the connection's byte count at the last check that found them waiting. */
  const answers = new Map<http.ServerResponse, number | undefined>();
  const onRequest = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    answers.set(res, undefined);
    res.once('close', () => answers.delete(res));
  };
  server.on('request', onRequest);
  const timer = setInterval(() => {
    for (const [res, before] of answers) {
      const socket = res.socket as Counted | null;
      const written = socket?.bytesWritten;
      if (!socket || written === undefined) continue;
      const waiting = res.headersSent && !res.writableFinished && (res.writableNeedDrain || (socket.writableLength ?? 0) > 0);
      if (!waiting) answers.set(res, undefined);
      else if (before === written) socket.destroy();
      else answers.set(res, written);
    }
  }, idleMs).unref();
  return () => {
    clearInterval(timer);
    server.off('request', onRequest);
  };
}
