import { createHash } from 'node:crypto';
import net from 'node:net';
import {
  ALGORITHM,
  UNSIGNED_PAYLOAD,
  canonicalPath,
  canonicalRequest,
  credentialScope,
  parseRawQuery,
  sign,
  signingKey,
  stringToSign,
  toAmzDate,
} from '../../../images/gateway/src/auth/sigv4.js';

/**
 * HTTP/1.1 written byte for byte on a socket, for requests no well-behaved client would send: raw
 * paths (invalid UTF-8, NUL), control characters in headers, bodies cut mid-way, broken framing.
 */

export interface RawRequest {
  method: string;
  /** Path and query exactly as sent, e.g. `/b/%FF?prefix=%00`. */
  target: string;
  headers: Array<[string, string]>;
  /** Bytes written after the headers (may disagree with content-length). */
  body?: Buffer;
  /** Close the socket after this many body bytes (a client that goes away); no answer is awaited. */
  cutAfter?: number;
  /** Half-close after the body: the server sees the end of the stream (for broken framing). */
  halfClose?: boolean;
  /** Leave out sendRaw's `connection: close` (bytes after the body are then the connection's next request). */
  keepAlive?: boolean;
}

export type RawOutcome =
  | { kind: 'answered'; status: number; headers: Record<string, string>; body: Buffer }
  | { kind: 'closed' } // the server closed without an answer
  | { kind: 'reset' } // the connection was reset before an answer arrived (one the server sent is lost so)
  | { kind: 'cut' } // we went away on purpose
  | { kind: 'hang' }; // nothing within the deadline

/** Send one request on a fresh connection (`connection: close` unless keepAlive) and read the first answer until the server closes. */
export function sendRaw(port: number, req: RawRequest, deadlineMs: number): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (outcome: RawOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ kind: 'hang' }), deadlineMs);
    socket.on('error', (err: Error & { code?: string }) => {
      const answer = parseAnswer(Buffer.concat(chunks));
      finish(answer.kind === 'closed' && (err.code === 'ECONNRESET' || err.code === 'EPIPE') ? { kind: 'reset' } : answer);
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => finish(parseAnswer(Buffer.concat(chunks))));
    socket.on('connect', () => {
      const head = `${req.method} ${req.target} HTTP/1.1\r\n${req.headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}${req.keepAlive ? '' : 'connection: close\r\n'}\r\n`;
      socket.write(Buffer.from(head, 'latin1'));
      const body = req.body ?? Buffer.alloc(0);
      if (req.cutAfter !== undefined) {
        socket.write(body.subarray(0, req.cutAfter), () => {
          // Let the bytes leave before going away, as a client dropping mid-upload does.
          setTimeout(() => finish({ kind: 'cut' }), 5);
        });
        return;
      }
      if (body.length) socket.write(body);
      // Without a half-close, a server that waits for more body bytes than were sent is what the deadline finds.
      if (req.halfClose) socket.end();
    });
  });
}

function parseAnswer(raw: Buffer): RawOutcome {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return { kind: 'closed' };
  const lines = raw.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0);
  if (!status) return { kind: 'closed' };
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { kind: 'answered', status, headers, body: raw.subarray(end + 4) };
}

export interface Credentials {
  accessKey: string;
  secret: string;
}

const sha256Hex = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/**
 * Sign a raw request with SigV4 header auth as the gateway reads it (the same canonical path and
 * query functions), over host, x-amz-date, x-amz-content-sha256 and every x-amz-* header it carries.
 * `payloadHash` defaults to the body's SHA-256.
 */
export function signRaw(req: RawRequest, host: string, creds: Credentials, opts: { payloadHash?: string; now?: Date; region?: string } = {}): RawRequest {
  const amzDate = toAmzDate(opts.now ?? new Date());
  const region = opts.region ?? 'us-east-1';
  const payloadHash = opts.payloadHash ?? (req.body ? sha256Hex(req.body) : sha256Hex(Buffer.alloc(0)));
  const headers: Array<[string, string]> = [['host', host], ['x-amz-date', amzDate], ['x-amz-content-sha256', payloadHash], ...req.headers];
  const byName: Record<string, string> = {};
  for (const [k, v] of headers) byName[k.toLowerCase()] = byName[k.toLowerCase()] === undefined ? v : `${byName[k.toLowerCase()]},${v}`;
  const signedHeaders = Object.keys(byName).filter((h) => h === 'host' || h.startsWith('x-amz-') || h === 'content-md5' || h === 'content-type');
  const q = req.target.indexOf('?');
  const rawPath = q < 0 ? req.target : req.target.slice(0, q);
  const rawQuery = q < 0 ? '' : req.target.slice(q + 1);
  const canonical = canonicalRequest({
    method: req.method,
    path: canonicalPath(rawPath),
    query: parseRawQuery(rawQuery),
    headers: byName,
    signedHeaders,
    payloadHash,
  });
  const scope = credentialScope(amzDate.slice(0, 8), region);
  const signature = sign(signingKey(creds.secret, amzDate.slice(0, 8), region), stringToSign(amzDate, scope, canonical));
  const authorization = `${ALGORITHM} Credential=${creds.accessKey}/${scope}, SignedHeaders=${[...signedHeaders].sort().join(';')}, Signature=${signature}`;
  return { ...req, headers: [...headers, ['authorization', authorization]] };
}

/**
 * The fields of a browser form (POST Object) whose policy allows any upload to `bucket` for an hour, signed
 * with SigV4 as the SDKs' createPresignedPost signs it.
 */
export function signedPostFields(bucket: string, creds: Credentials, now = new Date(), region = 'us-east-1'): Record<string, string> {
  const amzDate = toAmzDate(now);
  const credential = `${creds.accessKey}/${credentialScope(amzDate.slice(0, 8), region)}`;
  const policy = Buffer.from(
    JSON.stringify({
      expiration: new Date(now.getTime() + 3600_000).toISOString(),
      conditions: [{ bucket }, ['starts-with', '$key', ''], { 'x-amz-algorithm': ALGORITHM }, { 'x-amz-credential': credential }, { 'x-amz-date': amzDate }],
    }),
  ).toString('base64');
  return {
    'x-amz-algorithm': ALGORITHM,
    'x-amz-credential': credential,
    'x-amz-date': amzDate,
    policy,
    'x-amz-signature': sign(signingKey(creds.secret, amzDate.slice(0, 8), region), policy),
  };
}

export { UNSIGNED_PAYLOAD };
