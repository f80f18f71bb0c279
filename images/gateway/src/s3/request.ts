import { createHash } from 'node:crypto';
import { pipeline, type Readable, type Transform } from 'node:stream';
import type http from 'node:http';
import {
  checkUserMetadata,
  mergeStoredHeaders,
  header,
  parseTaggingHeader,
  readContentMd5,
  S3Error,
  OBJECT_UPLOAD_HEADERS,
  standardHeadersOf,
  WEBSITE_REDIRECT_HEADER,
  type StoredHeaders,
  type Tag,
} from '../../../object-model/src/index.js';
import { AwsChunkedDecoder } from '../auth/aws-chunked.js';
import { PayloadHashCheck } from '../auth/payload-hash.js';
import { EMPTY_SHA256, headerText, sha256Hex } from '../auth/sigv4.js';
import { acceptBody, state } from '../context.js';
import { ChecksumCheck, uploadChecksum } from './checksums.js';
import { type BodyCheck, VerifiedBody } from './verified-body.js';
import { urlEncodeKey } from './render.js';

/** (The one reader of request headers, the object model's; handlers import it from here.) */
export { header };

/** Largest XML request body we read (DeleteObjects, CompleteMultipartUpload, CreateBucketConfiguration). */
export const MAX_XML_BYTES = 1024 * 1024;

/** An upload's bytes as they will be stored, with the flexible checksum it asked for, if any. */
export interface ObjectUpload {
  /** Errors (a bad chunk signature, payload hash or checksum) surface on this stream. */
  body: Readable;
  /** Checked while the body streams; its value is set once the body has passed (the answer echoes it). */
  checksum?: ChecksumCheck;
}

/**
 * What an upload stores besides its bytes in headers: the standard ones (Cache-Control, ...) and a
 * checksum sent as a header, known at once; a checksum sent as a trailer, known once the body has passed.
 */
export function uploadHeaders(req: http.IncomingMessage, upload: ObjectUpload): { headers?: StoredHeaders; trailingHeaders?: () => StoredHeaders | undefined } {
  const { headers, trailingHeaders } = checksumHeadersOf(upload);
  const merged = mergeStoredHeaders(standardHeaders(req), headers);
  return { ...(merged ? { headers: merged } : {}), ...(trailingHeaders ? { trailingHeaders } : {}) };
}

/** The upload's checksum to store: at once when it was sent as a header, as a trailer when it followed the body. */
export function checksumHeadersOf(upload: ObjectUpload): { headers?: StoredHeaders; trailingHeaders?: () => StoredHeaders | undefined } {
  const { checksum } = upload;
  if (!checksum) return {};
  return checksum.knownAhead ? { headers: checksum.storedHeaders() } : { trailingHeaders: () => checksum.storedHeaders() };
}

/** Cache-Control, Content-Disposition, Content-Encoding (without aws-chunked), Content-Language, Expires, x-amz-website-redirect-location, as sent. */
export function standardHeaders(req: http.IncomingMessage): StoredHeaders | undefined {
  return standardHeadersOf(OBJECT_UPLOAD_HEADERS.map((name) => [name, req.headers[name]]));
}

/** x-amz-website-redirect-location alone, checked (what CopyObject's COPY directive takes from the request). */
export function websiteRedirect(req: http.IncomingMessage): StoredHeaders | undefined {
  return standardHeadersOf([[WEBSITE_REDIRECT_HEADER, req.headers[WEBSITE_REDIRECT_HEADER]]]);
}

/**
 * Whether the body comes in aws-chunked framing: signed as a stream (x-amz-content-sha256 STREAMING-*),
 * or (a presigned URL, whose signature says nothing of the body) `Content-Encoding: aws-chunked` with the
 * x-amz-decoded-content-length every chunked sender gives. `Content-Encoding: aws-chunked` on a plain body
 * (a client naming the encoding for what it sends whole) is a plain body, as S3 takes it.
 */
function isAwsChunked(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  if (state(res).caller?.sigv4?.payload.kind === 'chunked') return true;
  return /aws-chunked/.test(String(req.headers['content-encoding'] ?? '')) && req.headers['x-amz-decoded-content-length'] !== undefined;
}

/**
 * The request body as the object's bytes: aws-chunked framing decoded and each chunk signature
 * checked, the signed sha256 checked, and the flexible checksum (x-amz-checksum-*, header or trailer)
 * checked, all while streaming. InvalidRequest at once for checksum headers S3 refuses.
 */
export function objectBody(req: http.IncomingMessage, res: http.ServerResponse, opts: { checksum?: boolean } = {}): ObjectUpload {
  // The handler wants the body now: an anonymous client waiting with `Expect: 100-continue` is told to
  // send it only here, once the ACL allowed its write (a signed one was told once authenticated).
  acceptBody(res);
  const sig = state(res).caller?.sigv4;
  const payload = sig?.payload;
  const chunked = isAwsChunked(req, res);
  const requested = opts.checksum === false ? undefined : uploadChecksum(req.headers, chunked);
  const streams: Array<Readable | Transform> = [req];
  const checks: BodyCheck[] = [];
  let trailers: () => Readonly<Record<string, string>> = () => ({});
  if (chunked) {
    const signed = payload?.kind === 'chunked' && payload.signed && sig;
    const declared = header(req, 'x-amz-decoded-content-length');
    const decoder = new AwsChunkedDecoder(
      signed ? { key: sig.key, scope: sig.scope, amzDate: sig.amzDate, seedSignature: sig.seedSignature, trailer: payload.trailer } : undefined,
      declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined,
    );
    streams.push(decoder);
    trailers = () => decoder.trailers;
  } else if (payload?.kind === 'sha256' && payload.hex !== EMPTY_SHA256) {
    // (A body signed as empty has nothing to be checked against.)
    checks.push(new PayloadHashCheck(payload.hex));
  }
  const checksum = requested && new ChecksumCheck(requested, trailers);
  if (checksum) checks.push(checksum);
  if (checks.length > 0) streams.push(new VerifiedBody(checks));
  if (streams.length === 1) return { body: req };
  pipeline(streams, () => undefined);
  return { body: streams[streams.length - 1]!, checksum };
}

/**
 * Length of the object's bytes: x-amz-decoded-content-length for aws-chunked, else Content-Length
 * (MissingContentLength when it is no whole number; whether it is too large the object layer judges).
 */
export function objectLength(req: http.IncomingMessage, res: http.ServerResponse): number {
  const raw = isAwsChunked(req, res) ? req.headers['x-amz-decoded-content-length'] : req.headers['content-length'];
  if (raw === undefined || Array.isArray(raw) || !/^\d+$/.test(raw)) throw new S3Error('MissingContentLength');
  return Number(raw);
}

/**
 * A PutObject's length, as objectLength; but a plain body sent `Transfer-Encoding: chunked` without a
 * Content-Length is taken as MinIO and radosgw take it (`curl -T -`, SDK streams of unknown size):
 * undefined, its size known once it ended whole. The data plane still refuses it past the largest single
 * upload (EntityTooLarge) and keeps nothing of a body cut short. (S3 itself answers such a PUT 411.)
 */
export function putObjectLength(req: http.IncomingMessage, res: http.ServerResponse): number | undefined {
  if (req.headers['content-length'] === undefined && isTransferChunked(req) && !isAwsChunked(req, res)) return undefined;
  return objectLength(req, res);
}

/** The body comes as HTTP/1.1 chunks (its length is not known ahead). */
function isTransferChunked(req: http.IncomingMessage): boolean {
  return /(^|,)\s*chunked\s*$/i.test(String(req.headers['transfer-encoding'] ?? ''));
}

/** Let the rest of a body we will not use flow away (so the client can read our answer). */
export function discard(body: Readable): void {
  body.on('error', () => undefined);
  body.resume();
}

/**
 * Read a small body whole (XML documents), bounded; the signed sha256 and a flexible checksum are
 * checked when there are. `checksum: false` where x-amz-checksum-* headers are not about the body
 * (CompleteMultipartUpload: they are the object's).
 */
export async function readSmallBody(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  limit = MAX_XML_BYTES,
  opts: { checksum?: boolean } = {},
): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) {
    discard(req);
    throw new S3Error('MaxMessageLengthExceeded');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  // Keep reading past the limit (without keeping bytes) so the client gets our answer, not a reset.
  for await (const chunk of objectBody(req, res, opts).body) {
    size += (chunk as Buffer).length;
    if (size <= limit) chunks.push(chunk as Buffer);
  }
  if (size > limit) throw new S3Error('MaxMessageLengthExceeded');
  return Buffer.concat(chunks);
}

/**
 * A small request document (XML) read whole, with the integrity check its client sent: Content-MD5
 * compared here, a flexible checksum (header or trailer) checked while it is read. With `required`,
 * a request carrying neither is refused, as S3 refuses it for the operations that need one.
 */
export async function readCheckedDocument(req: http.IncomingMessage, res: http.ServerResponse, opts: { required?: boolean } = {}): Promise<Buffer> {
  const md5 = readContentMd5(req.headers['content-md5']);
  if (opts.required && !md5 && req.headers['x-amz-trailer'] === undefined && !Object.keys(req.headers).some((h) => h.startsWith('x-amz-checksum-'))) {
    discard(req);
    throw new S3Error('InvalidRequest', 'Missing required header for this request: Content-MD5 (or an x-amz-checksum-* header).');
  }
  const body = await readSmallBody(req, res);
  if (md5 && createHash('md5').update(body).digest('base64') !== md5) throw new S3Error('BadDigest');
  return body;
}

/** x-amz-meta-* headers → {name: value} (names lower case, prefix removed, values as UTF-8 text), at most MAX_METADATA_BYTES. */
export function userMetadata(req: http.IncomingMessage): Record<string, string> {
  return userMetadataOf(Object.entries(req.headers).map(([name, v]) => [name, Array.isArray(v) ? v.map(headerText) : v && headerText(v)]));
}

/** An RFC 2047 encoded word in UTF-8 (`=?UTF-8?B?...?=` or `=?UTF-8?Q?...?=`). */
const ENCODED_WORD = /=\?utf-8\?([bq])\?([^?]*)\?=/gi;

/**
 * A user metadata value as S3 keeps it: RFC 2047 encoded words (UTF-8) decoded before it is stored; and
 * as S3 answers it (metadataHeaderValue), encoded again when it is not US-ASCII, so that it is mail-safe.
 */
function decodeEncodedWords(value: string): string {
  return value.replace(ENCODED_WORD, (_, kind: string, text: string) =>
    kind.toLowerCase() === 'b'
      ? Buffer.from(text, 'base64').toString('utf8')
      : Buffer.from(
          text.replace(/_/g, ' ').replace(/=([0-9a-f]{2})/gi, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
          'latin1',
        ).toString('utf8'),
  );
}

/** A stored user metadata value as the header S3 answers: US-ASCII as is, anything else one RFC 2047 encoded word. */
export function metadataHeaderValue(value: string): string {
  return /^\p{ASCII}*$/u.test(value) ? value : `=?UTF-8?B?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

/** `x-amz-tagging` (URL-encoded `k1=v1&k2=v2`), checked as S3 checks it; undefined when absent. */
export function objectTagging(req: http.IncomingMessage): Tag[] | undefined {
  const raw = header(req, 'x-amz-tagging');
  return raw === undefined ? undefined : parseTaggingHeader(raw);
}

/** x-amz-meta-* entries (headers, or a form's fields) → {name: value}, at most MAX_METADATA_BYTES. */
export function userMetadataOf(entries: Iterable<[string, string | string[] | undefined]>): Record<string, string> {
  const meta: Record<string, string> = {};
  for (const [name, value] of entries) {
    if (name.startsWith('x-amz-meta-')) meta[name.slice('x-amz-meta-'.length)] = decodeEncodedWords(Array.isArray(value) ? value.join(',') : (value ?? ''));
  }
  checkUserMetadata(meta);
  return meta;
}

/** The sha256 of a JSON body sent with SigV4 must match what was signed (admin routes). */
export function checkSignedJsonBody(res: http.ServerResponse, raw: Buffer | undefined): void {
  const payload = state(res).caller?.sigv4?.payload;
  if (payload?.kind === 'sha256' && sha256Hex(raw ?? Buffer.alloc(0)) !== payload.hex) {
    throw new S3Error('BadDigest', 'The provided x-amz-content-sha256 header does not match what was computed.');
  }
}

/** `encoding-type=url`: keys and prefixes in the answer URL-encoded; anything else is InvalidArgument. */
export function encoderOf(query: URLSearchParams): (s: string) => string {
  const enc = query.get('encoding-type');
  if (enc === null || enc === '') return (s) => s;
  if (enc !== 'url')
    throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request', { ArgumentName: 'encoding-type', ArgumentValue: enc });
  return urlEncodeKey;
}
