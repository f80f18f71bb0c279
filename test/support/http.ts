import http from 'node:http';

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
