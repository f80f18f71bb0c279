/** What an S3 server access-log line says about one request (S3's documented fields, in their order). */
export interface AccessLogRecord {
  bucketOwner: string;
  bucket: string;
  time: Date;
  remoteIp: string;
  /** The caller's user name; undefined for an anonymous request. */
  requester?: string;
  requestId: string;
  /** REST.GET.OBJECT etc. (log-operation.ts). */
  operation: string;
  /** The object key; undefined for a request without one. */
  key?: string;
  /** `GET /bucket/key?query HTTP/1.1`. */
  requestUri: string;
  httpStatus: number;
  errorCode?: string;
  /** Body bytes sent (undefined or 0: `-`). */
  bytesSent?: number;
  objectSize?: number;
  totalTimeMs: number;
  turnAroundTimeMs?: number;
  referer?: string;
  userAgent?: string;
  /** SigV2 / SigV4, undefined when not signed that way. */
  signatureVersion?: 'SigV2' | 'SigV4';
  /** AuthHeader / QueryString, undefined when not signed that way. */
  authType?: 'AuthHeader' | 'QueryString';
  hostHeader?: string;
  tlsVersion?: string;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const two = (n: number) => String(n).padStart(2, '0');

/** `[06/Feb/2019:00:00:38 +0000]`, S3's time field (UTC). */
export function logTime(t: Date): string {
  return `[${two(t.getUTCDate())}/${MONTHS[t.getUTCMonth()]}/${t.getUTCFullYear()}:${two(t.getUTCHours())}:${two(t.getUTCMinutes())}:${two(t.getUTCSeconds())} +0000]`;
}

const percent = (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`;

/**
 * A field without quotes: `-` when empty; whitespace, quotes, brackets and backslashes percent-encoded, so that
 * the line splits as its readers split it (s3-tests and common tools read brackets as quotes, then shell words).
 */
function bare(v: string | number | undefined): string {
  if (v === undefined || v === '') return '-';
  return String(v).replace(/[\s"'[\]\\]/g, percent);
}

/** A quoted field (request-URI, referer, user agent): `"-"` when empty; quotes and backslashes escaped, brackets percent-encoded, control characters dropped. */
function quotedField(v: string | undefined): string {
  if (!v) return '"-"';
  // eslint-disable-next-line no-control-regex
  const printable = v.replace(/[\u0000-\u001f\u007f]/g, '');
  return `"${printable.replace(/[[\]]/g, percent).replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** A key as S3 logs it: URL-encoded, `/` kept (and `'`, which encodeURIComponent keeps, encoded for shell-word readers). */
function logKey(key: string | undefined): string {
  return key ? encodeURIComponent(key).replace(/%2F/g, '/').replace(/'/g, '%27') : '-';
}

/**
 * One line of S3's server access-log format: 26 space-separated fields (bracketed time, quoted URI, referer
 * and user agent), `-` where a field has no value. Version id, cipher suite, access point ARN and "ACL
 * required" are always `-` here (no versioning, no access points; TLS ends before the gateway, at the ingress).
 */
export function accessLogLine(r: AccessLogRecord): string {
  return [
    bare(r.bucketOwner),
    bare(r.bucket),
    logTime(r.time),
    bare(r.remoteIp),
    bare(r.requester),
    bare(r.requestId),
    bare(r.operation),
    logKey(r.key),
    quotedField(r.requestUri),
    String(r.httpStatus),
    bare(r.errorCode),
    r.bytesSent ? String(r.bytesSent) : '-',
    r.objectSize === undefined ? '-' : String(r.objectSize),
    String(Math.round(r.totalTimeMs)),
    r.turnAroundTimeMs === undefined ? '-' : String(Math.round(r.turnAroundTimeMs)),
    quotedField(r.referer),
    quotedField(r.userAgent),
    '-',
    bare(r.requestId),
    bare(r.signatureVersion),
    '-',
    bare(r.authType),
    bare(r.hostHeader),
    bare(r.tlsVersion),
    '-',
    '-',
  ].join(' ');
}
