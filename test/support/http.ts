import http from 'node:http';
import net from 'node:net';

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The whole body, as bytes and as UTF-8 text. */
  bytes: Buffer;
  body: string;
}

/**
 * One request through node:http, the whole answer read. The path goes out exactly as given (fetch
 * would normalise `..` and `%2E%2E`). With `trailers` the body is sent chunked and the trailers
 * after it; otherwise it is the request's one write.
 */
export function httpExchange(url: string | URL, options: http.RequestOptions, body?: Buffer | string, trailers?: Record<string, string>): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes, body: bytes.toString() });
      });
    });
    req.on('error', reject);
    if (!trailers) {
      req.end(body);
      return;
    }
    if (body !== undefined) req.write(body);
    req.addTrailers(trailers);
    req.end();
  });
}

/** `method path` to the server at `endpoint`, with a content-length for the body when there is one: its status and text. */
export async function rawRequest(
  endpoint: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
): Promise<{ status: number; body: string }> {
  const answer = await httpExchange(
    endpoint,
    { method, path, headers: { ...headers, ...(body !== undefined ? { 'content-length': Buffer.byteLength(body) } : {}) } },
    body,
  );
  return { status: answer.status, body: answer.body };
}

/** What came back on one connection, and how it ended. */
export interface Conversation {
  /** Everything the server wrote, as latin1 text. */
  text: string;
  /** The status lines in order. */
  statuses: number[];
  /** The socket error the client saw, if any (ECONNRESET: the server reset the connection; 'hang': no close within the deadline). */
  error?: string;
}

/**
 * Write `head` and then `bodyBytes` bytes of filler on a fresh connection without reading anything (a client
 * that reads its answer only once it has sent everything), stop writing at the first failure, then read until
 * the server closes (the client never half-closes: Node's server would drop the answers still owed) or
 * `deadlineMs` passed.
 */
export function sendAllThenRead(port: number, head: string, bodyBytes: number, after = '', deadlineMs = 30_000): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.pause();
    const chunks: Buffer[] = [];
    let error: string | undefined;
    const deadline = setTimeout(() => {
      error ??= 'hang';
      socket.destroy();
    }, deadlineMs);
    const finish = () => {
      clearTimeout(deadline);
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ text, statuses: [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])), error });
    };
    socket.on('error', (err: Error & { code?: string }) => {
      error ??= err.code ?? err.message;
    });
    socket.on('close', finish);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('connect', async () => {
      socket.write(head);
      const filler = Buffer.alloc(256 * 1024, 0x61);
      for (let sent = 0; sent < bodyBytes && !error && !socket.destroyed; sent += filler.length) {
        if (!socket.write(filler.subarray(0, Math.min(filler.length, bodyBytes - sent)))) {
          // (Both listeners go once either fires: a long body waits many times on one socket.)
          await new Promise<void>((r) => {
            const go = () => {
              socket.off('drain', go);
              socket.off('close', go);
              r();
            };
            socket.once('drain', go);
            socket.once('close', go);
          });
        }
      }
      if (after && !socket.destroyed) socket.write(after);
      // Everything is sent: now read the answer (what the kernel kept of it).
      socket.resume();
    });
  });
}

/**
 * Write `head`, then `body` one byte every `gapMs` (a trickling client), reading whatever comes back, until
 * the server closes or `deadlineMs` passed (send `Connection: close` in the head to have it close after its answer).
 */
export function trickleThenRead(port: number, head: string, body: string, gapMs: number, deadlineMs = 30_000): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    let error: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    const deadline = setTimeout(() => {
      error ??= 'hang';
      socket.destroy();
    }, deadlineMs);
    socket.on('error', (err: Error & { code?: string }) => {
      error ??= err.code ?? err.message;
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => {
      clearTimeout(deadline);
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ text, statuses: [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])), error });
    });
    const bytes = Buffer.from(body);
    let sent = 0;
    const next = () => {
      if (socket.destroyed || sent >= bytes.length) return;
      socket.write(bytes.subarray(sent, ++sent));
      timer = setTimeout(next, gapMs);
    };
    socket.on('connect', () => {
      socket.write(head);
      timer = setTimeout(next, gapMs);
    });
  });
}
