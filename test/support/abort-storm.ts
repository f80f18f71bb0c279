import { randomBytes } from 'node:crypto';
import net from 'node:net';

/** One upload to abort: a request line's target and headers, and the Content-Length it declares. */
export interface AbortedUpload {
  /** Path and query, e.g. a presigned URL's. */
  target: string;
  headers: Record<string, string>;
  contentLength: number;
}

/** mulberry32, so that a failing storm can be replayed from its printed seed. */
export { mulberry32 as seededRandom } from '../../images/service-kit/src/random.js';

/**
 * Send a PUT over a raw loopback socket, stop after `cutAt` body bytes (0: the headers only) and
 * end the connection the way a failing client does: a TCP reset, a plain close, or a half-close. Resolves once the socket is closed; what the server answered (if
 * anything) does not matter here.
 */
export function abortUpload(origin: string, upload: AbortedUpload, cutAt: number, how: 'reset' | 'close' | 'half-close', pauseMs: number): Promise<void> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    socket.once('close', () => resolve());
    socket.once('connect', () => {
      const head = [
        `PUT ${upload.target} HTTP/1.1`,
        `Host: ${hostname}:${port}`,
        `Content-Length: ${upload.contentLength}`,
        ...Object.entries(upload.headers).map(([k, v]) => `${k}: ${v}`),
        '',
        '',
      ].join('\r\n');
      socket.write(head);
      // The body in a few writes, so the server sees it arrive in pieces.
      let sent = 0;
      const step = Math.max(1, Math.ceil(cutAt / 4));
      const writeMore = () => {
        if (sent >= cutAt) {
          setTimeout(() => {
            if (how === 'reset') socket.resetAndDestroy();
            else if (how === 'close') socket.destroy();
            else {
              socket.end();
              // A server that still waits for the rest of the body is left to its own timeouts: give up here.
              setTimeout(() => socket.destroy(), 200).unref();
            }
          }, pauseMs);
          return;
        }
        const n = Math.min(step, cutAt - sent);
        sent += n;
        if (socket.write(randomBytes(n))) setImmediate(writeMore);
        else socket.once('drain', writeMore);
      };
      writeMore();
    });
  });
}

/** Run `count` tasks over `concurrency` workers. */
export async function overWorkers(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await task(next++);
    }),
  );
}
