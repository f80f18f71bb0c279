import crypto, { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * AWS Signature Version 4 as S3 applies it: the canonical request, the string to sign, the signing key
 * and the chunk signatures of aws-chunked bodies. Pure functions, so both verification (incoming
 * requests) and signing (presigned URLs the gateway hands out) use the same rules.
 */

export const ALGORITHM = 'AWS4-HMAC-SHA256';
export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
export const STREAMING_PAYLOAD = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
export const STREAMING_PAYLOAD_TRAILER = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER';
export const STREAMING_UNSIGNED_TRAILER = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
/** Longest validity S3 accepts for a presigned URL. */
export const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

/** Node's one-shot digest (20.12+), a fraction of createHash()'s cost for the short strings hashed per request. */
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string | Buffer, encoding: 'hex') => string }).hash;

export function sha256Hex(data: string | Buffer): string {
  return oneShotHash ? oneShotHash('sha256', data, 'hex') : createHash('sha256').update(data).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

/** RFC 3986 encoding as SigV4 wants it: everything but A-Z a-z 0-9 - _ . ~ is %XX (upper case). */
export function uriEncode(value: string, encodeSlash = true): string {
  // Fast path: most keys need no encoding at all.
  if ((encodeSlash ? /^[A-Za-z0-9\-_.~]*$/ : /^[A-Za-z0-9\-_.~/]*$/).test(value)) return value;
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.~]/.test(c) || (!encodeSlash && c === '/')) out += c;
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Decode %XX sequences without turning '+' into a space (SigV4 clients encode spaces as %20). */
export function safeDecode(value: string): string {
  if (!value.includes('%')) return value; // (nothing to decode: the common case, without the call)
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * A header value as the text its bytes spell in UTF-8. Node reads header bytes as Latin-1 (one character
 * per byte); clients sign, and mean, the UTF-8 text. Bytes that are not UTF-8 are left as read.
 */
export function headerText(value: string): string {
  if (!/[\x80-\xff]/.test(value)) return value;
  const bytes = Buffer.from(value, 'latin1');
  const text = bytes.toString('utf8');
  return Buffer.from(text, 'utf8').equals(bytes) ? text : value;
}

/** Parse a raw query string into decoded [name, value] pairs, keeping order and duplicates. */
export function parseRawQuery(rawQuery: string): Array<[string, string]> {
  if (!rawQuery) return [];
  return rawQuery
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const eq = pair.indexOf('=');
      return eq < 0 ? [safeDecode(pair), ''] : [safeDecode(pair.slice(0, eq)), safeDecode(pair.slice(eq + 1))];
    });
}

/** Canonical query string: names and values encoded, sorted by name then value. */
export function canonicalQuery(pairs: Array<[string, string]>): string {
  return pairs
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

/** S3 does not normalise the path: each segment is decoded once and encoded once, slashes kept. */
export function canonicalPath(rawPath: string): string {
  return uriEncode(safeDecode(rawPath), false) || '/';
}

export function canonicalHeaderValue(value: string | string[] | undefined): string {
  const v = Array.isArray(value) ? value.join(',') : (value ?? '');
  return v.trim().replace(/\s+/g, ' ');
}

export interface CanonicalRequestInput {
  method: string;
  /** Already canonical path (see canonicalPath). */
  path: string;
  /** The signed query's pairs, or their canonical text (canonicalQuery). */
  query: Array<[string, string]> | string;
  headers: Record<string, string | string[] | undefined>;
  signedHeaders: string[];
  payloadHash: string;
}

export function canonicalRequest(input: CanonicalRequestInput): string {
  const signed = [...input.signedHeaders].sort();
  const headerLines = signed.map((name) => `${name}:${canonicalHeaderValue(input.headers[name])}\n`).join('');
  const query = typeof input.query === 'string' ? input.query : canonicalQuery(input.query);
  return `${input.method}\n${input.path}\n${query}\n${headerLines}\n${signed.join(';')}\n${input.payloadHash}`;
}

export function credentialScope(date: string, region: string, service = 's3'): string {
  return `${date}/${region}/${service}/aws4_request`;
}

export function stringToSign(amzDate: string, scope: string, canonical: string): string {
  return `${ALGORITHM}\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`;
}

const signingKeys = new Map<string, Buffer>();

/** The derived key changes once a day per secret: remember it rather than run four HMACs per request. */
export function signingKey(secret: string, date: string, region: string, service = 's3'): Buffer {
  // Keyed by the secret itself (held in memory by the credentials cache anyway): hashing it per request cost as much as the lookup saved.
  const id = `${date}/${region}/${service}\n${secret}`;
  let key = signingKeys.get(id);
  if (!key) {
    key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
    if (signingKeys.size > 10_000) signingKeys.clear();
    signingKeys.set(id, key);
  }
  return key;
}

export function sign(key: Buffer, data: string): string {
  return createHmac('sha256', key).update(data).digest('hex');
}

/** The string to sign of one aws-chunked chunk, chained on the previous signature. */
export function chunkStringToSign(amzDate: string, scope: string, previousSignature: string, chunkSha256: string): string {
  return ['AWS4-HMAC-SHA256-PAYLOAD', amzDate, scope, previousSignature, EMPTY_SHA256, chunkSha256].join('\n');
}

/** The string a signed trailer's signature covers (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER). */
export function trailerStringToSign(amzDate: string, scope: string, finalChunkSignature: string, canonicalTrailers: string): string {
  return ['AWS4-HMAC-SHA256-TRAILER', amzDate, scope, finalChunkSignature, sha256Hex(canonicalTrailers)].join('\n');
}

export function signaturesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The last time toAmzDate formatted, and its text: requests of the same second reuse it. */
let lastAmzDate = { ms: NaN, text: '' };

/** `20130524T000000Z` from a Date. */
export function toAmzDate(date: Date): string {
  const ms = date.getTime();
  if (ms === lastAmzDate.ms) return lastAmzDate.text;
  const text = date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  lastAmzDate = { ms, text };
  return text;
}

/** The last text parseAmzDate read, and its time (requests of the same second name the same). */
let lastParsedAmzDate: { text: string; ms: number } | undefined;

/** Parse `20130524T000000Z`; undefined when malformed. */
export function parseAmzDate(value: string): Date | undefined {
  if (lastParsedAmzDate !== undefined && value === lastParsedAmzDate.text) return new Date(lastParsedAmzDate.ms);
  const date = readAmzDate(value);
  if (date) lastParsedAmzDate = { text: value, ms: date.getTime() };
  return date;
}

function readAmzDate(value: string): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!m) return undefined;
  const d = new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]));
  return Number.isNaN(d.getTime()) ? undefined : d;
}

export interface PresignInput {
  method: string;
  /** Origin the client will call, e.g. http://127.0.0.1:9000 */
  origin: string;
  /** Decoded path, e.g. /bucket/key with spaces */
  path: string;
  accessKey: string;
  secret: string;
  region: string;
  expiresSeconds: number;
  now?: Date;
  extraQuery?: Array<[string, string]>;
  /** Headers (lower-case names) the request will carry and the URL signs besides host: every x-amz-* one must be. */
  headers?: Record<string, string>;
}

/** A SigV4 query-authenticated URL (what `aws s3 presign` makes), signed over the host header and `headers`. */
export function presignUrl(input: PresignInput): string {
  const now = input.now ?? new Date();
  const amzDate = toAmzDate(now);
  const scope = credentialScope(amzDate.slice(0, 8), input.region);
  const headers = { ...input.headers, host: new URL(input.origin).host };
  const signedHeaders = Object.keys(headers).sort();
  const query: Array<[string, string]> = [
    ...(input.extraQuery ?? []),
    ['X-Amz-Algorithm', ALGORITHM],
    ['X-Amz-Credential', `${input.accessKey}/${scope}`],
    ['X-Amz-Date', amzDate],
    ['X-Amz-Expires', String(input.expiresSeconds)],
    ['X-Amz-SignedHeaders', signedHeaders.join(';')],
  ];
  const path = uriEncode(input.path, false);
  const canonical = canonicalRequest({ method: input.method, path, query, headers, signedHeaders, payloadHash: UNSIGNED_PAYLOAD });
  const signature = sign(signingKey(input.secret, amzDate.slice(0, 8), input.region), stringToSign(amzDate, scope, canonical));
  return `${input.origin.replace(/\/$/, '')}${path}?${canonicalQuery(query)}&X-Amz-Signature=${signature}`;
}
