import { isStoredAcl, OBJECT_ACL_HEADER } from './access-control.js';
import { S3Error } from './s3-errors.js';

/**
 * The HTTP headers an object keeps besides its content type and user metadata, by lower-case name:
 * the standard ones a client sets on upload and gets back on every GET/HEAD (S3's "system-defined
 * metadata": a static site's `Content-Encoding: gzip` and `Cache-Control` depend on them), and the
 * object's flexible checksum (`x-amz-checksum-<algorithm>` with `x-amz-checksum-type`), answered when
 * a reader asks for it (`x-amz-checksum-mode: ENABLED`).
 */
export type StoredHeaders = Record<string, string>;

/** Standard headers stored from an upload and answered as they were sent (each has a `response-*` override on GET). */
export const STANDARD_OBJECT_HEADERS = ['cache-control', 'content-disposition', 'content-encoding', 'content-language', 'expires'] as const;

/**
 * S3's page redirect for website hosting, stored and answered like the standard headers (`aws s3 cp
 * --website-redirect`). Nothing redirects here (there is no website endpoint), as on S3's REST endpoint.
 */
export const WEBSITE_REDIRECT_HEADER = 'x-amz-website-redirect-location';
const MAX_REDIRECT_BYTES = 2048;

/** Every header an upload may set on its object: PutObject, CopyObject with REPLACE, CreateMultipartUpload, form fields. */
export const OBJECT_UPLOAD_HEADERS = [...STANDARD_OBJECT_HEADERS, WEBSITE_REDIRECT_HEADER] as const;

const CHECKSUM_HEADER = /^x-amz-checksum-(crc32|crc32c|crc64nvme|sha1|sha256)$/;
const CHECKSUM_TYPE = 'x-amz-checksum-type';
/** Every stored header together (S3 bounds request headers at 8 KiB; this leaves room for the rest). */
const MAX_STORED_BYTES = 8 * 1024;

/** An object's checksum as stored with it. */
export interface ObjectChecksum {
  /** `CRC32`, `CRC32C`, `CRC64NVME`, `SHA1` or `SHA256`. */
  algorithm: string;
  /** Base64 of the digest (a composite one ends in `-N`). */
  value: string;
  type: 'FULL_OBJECT' | 'COMPOSITE';
}

/**
 * The standard headers among a request's headers or a form's fields (names in any case), as stored:
 * `aws-chunked` is the upload's framing, not the object's encoding, so it leaves Content-Encoding
 * (which is then not stored when nothing else is left, as S3 does). Undefined when there are none.
 */
export function standardHeadersOf(entries: Iterable<[string, string | string[] | undefined]>): StoredHeaders | undefined {
  let found: StoredHeaders | undefined;
  for (const [rawName, rawValue] of entries) {
    const name = rawName.toLowerCase();
    if (!(OBJECT_UPLOAD_HEADERS as readonly string[]).includes(name) || rawValue === undefined) continue;
    let value = Array.isArray(rawValue) ? rawValue.join(', ') : rawValue;
    if (name === 'content-encoding')
      value = value
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '' && v.toLowerCase() !== 'aws-chunked')
        .join(', ');
    if (value === '') continue;
    (found ??= {})[name] = value;
  }
  if (found) checkStoredHeaders(found);
  return found;
}

/** The checksum headers to store for `checksum`. */
export function checksumHeaders(checksum: ObjectChecksum): StoredHeaders {
  return { [`x-amz-checksum-${checksum.algorithm.toLowerCase()}`]: checksum.value, [CHECKSUM_TYPE]: checksum.type };
}

/** The checksum stored among an object's headers, if any. */
export function storedChecksum(headers: StoredHeaders | undefined): ObjectChecksum | undefined {
  if (!headers) return undefined;
  for (const [name, value] of Object.entries(headers)) {
    const m = CHECKSUM_HEADER.exec(name);
    if (m) return { algorithm: m[1]!.toUpperCase(), value, type: headers[CHECKSUM_TYPE] === 'COMPOSITE' ? 'COMPOSITE' : 'FULL_OBJECT' };
  }
  return undefined;
}

/** The headers without the checksum (what a reader gets unless it asks for the checksum). */
export function withoutChecksum(headers: StoredHeaders | undefined): StoredHeaders | undefined {
  if (!headers) return undefined;
  const kept = Object.entries(headers).filter(([name]) => name !== CHECKSUM_TYPE && !CHECKSUM_HEADER.test(name));
  return kept.length ? Object.fromEntries(kept) : undefined;
}

/**
 * The headers a copy gets with CopyObject's COPY directive: the source's, except its website redirect,
 * which S3 never copies (it is "unique to each object"): the copy has the one its request names, if any.
 * Nor is an ACL ever copied (S3: a copy is private unless its request gives it an ACL).
 */
export function copiedHeaders(source: StoredHeaders | undefined, requested: StoredHeaders | undefined): StoredHeaders | undefined {
  const { [WEBSITE_REDIRECT_HEADER]: _sourceRedirect, [OBJECT_ACL_HEADER]: _sourceAcl, ...kept } = source ?? {};
  const fromRequest = Object.fromEntries(
    [WEBSITE_REDIRECT_HEADER, OBJECT_ACL_HEADER].flatMap((name) => (requested?.[name] === undefined ? [] : [[name, requested[name]]])),
  ) as StoredHeaders;
  return mergeStoredHeaders(kept, fromRequest);
}

/** `a` with `b` over it; undefined when both are empty. */
export function mergeStoredHeaders(a: StoredHeaders | undefined, b: StoredHeaders | undefined): StoredHeaders | undefined {
  const merged = { ...a, ...b };
  return Object.keys(merged).length ? merged : undefined;
}

/** Only names this module stores, string values, bounded in size; InvalidArgument otherwise. */
function checkStoredHeaders(headers: StoredHeaders): void {
  let bytes = 0;
  for (const [name, value] of Object.entries(headers)) {
    const known = (OBJECT_UPLOAD_HEADERS as readonly string[]).includes(name) || CHECKSUM_HEADER.test(name) || name === CHECKSUM_TYPE;
    if (name === OBJECT_ACL_HEADER) {
      if (typeof value !== 'string' || !isStoredAcl(value)) throw new S3Error('InvalidArgument', 'the stored ACL is not well formed');
      bytes += name.length + value.length;
      continue;
    }
    if (!known) throw new S3Error('InvalidArgument', `${name} is not a header stored with objects`);
    // (What an HTTP answer can carry: no control characters, nothing beyond Latin-1.)
    if (typeof value !== 'string' || /[^\t\x20-\x7e\x80-\xff]/.test(value))
      throw new S3Error('InvalidArgument', `the value of ${name} must be a single line of Latin-1 text`);
    if (name === WEBSITE_REDIRECT_HEADER && (!/^(\/|https?:\/\/)/.test(value) || Buffer.byteLength(value) > MAX_REDIRECT_BYTES)) {
      throw new S3Error(
        'InvalidRedirectLocation',
        `The website redirect location must have a prefix of 'http://' or 'https://' or '/', and at most ${MAX_REDIRECT_BYTES} bytes.`,
      );
    }
    bytes += name.length + Buffer.byteLength(value);
  }
  if (bytes > MAX_STORED_BYTES) throw new S3Error('InvalidArgument', `the object's stored headers exceed ${MAX_STORED_BYTES} bytes`);
}

/** Stored headers as another service sent them (JSON), checked; undefined when absent or empty. */
export function storedHeadersFromJson(value: unknown): StoredHeaders | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) throw new S3Error('InvalidArgument', 'stored headers must be a JSON object of strings');
  const headers = value as StoredHeaders;
  checkStoredHeaders(headers);
  return Object.keys(headers).length ? { ...headers } : undefined;
}
