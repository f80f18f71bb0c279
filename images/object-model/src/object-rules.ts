/*
 * The S3 rules on what a request may ask, each defined once here (issue #41, item 3). Readers
 * (`read*`) turn a value as sent into typed input, or the S3 error S3 gives for its form: the gateway
 * reads what clients send with them, and the object layer's internal APIs read what the gateway passes
 * on with the same ones. Checks (`check*`) judge typed input: the object layer (data plane, and the
 * tests' FakeObjectLayer) runs them, so a value refused for its meaning gets one answer whichever way
 * it came in (test/gateway/rule-owners.test.ts, test/data-plane/rule-owners.test.ts).
 */
import { S3Error } from './s3-errors.js';
import { WEBSITE_REDIRECT_HEADER, type StoredHeaders } from './stored-headers.js';

/** Largest object a single PUT (or copy) stores, and the largest part: S3's 5 GiB. */
export const MAX_OBJECT_SIZE = 5 * 1024 ** 3;

/** A body's declared size (a PUT's, a part's): at most MAX_OBJECT_SIZE (EntityTooLarge, before any byte is stored). */
export function checkObjectSize(size: number | undefined): void {
  if (size !== undefined && size > MAX_OBJECT_SIZE)
    throw new S3Error('EntityTooLarge', undefined, { ProposedSize: String(size), MaxSizeAllowed: String(MAX_OBJECT_SIZE) });
}

/** Most bytes of user metadata (names and values, as UTF-8) an object carries: S3's 2 KiB. */
export const MAX_METADATA_BYTES = 2048;

/** User metadata: string values, at most MAX_METADATA_BYTES of names and values (MetadataTooLarge). */
export function checkUserMetadata(meta: Record<string, string>): void {
  let bytes = 0;
  for (const [k, v] of Object.entries(meta)) {
    if (typeof v !== 'string') throw new S3Error('InvalidArgument', `user metadata ${JSON.stringify(k)} must be a string`);
    bytes += Buffer.byteLength(k) + Buffer.byteLength(v);
  }
  if (bytes > MAX_METADATA_BYTES) throw new S3Error('MetadataTooLarge', `user metadata is ${bytes} bytes; at most ${MAX_METADATA_BYTES}`);
}

/**
 * S3 refuses a copy of an object onto itself that changes nothing: it must replace the metadata
 * (metadataDirective REPLACE) or set a website redirect.
 */
export function checkCopyChangesObject(copy: {
  bucket: string;
  key: string;
  sourceBucket: string;
  sourceKey: string;
  metadataDirective?: 'COPY' | 'REPLACE';
  headers?: StoredHeaders;
  /** The copy asks for encryption (x-amz-server-side-encryption or a customer key): a change of the object. */
  sse?: { method?: string; customerKey?: string };
}): void {
  if (copy.sourceBucket !== copy.bucket || copy.sourceKey !== copy.key) return;
  if (copy.metadataDirective === 'REPLACE' || copy.headers?.[WEBSITE_REDIRECT_HEADER] !== undefined) return;
  if (copy.sse?.method !== undefined || copy.sse?.customerKey !== undefined) return;
  throw new S3Error(
    'InvalidRequest',
    "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website " +
      'redirect location or encryption attributes.',
  );
}

/** Highest part number of a multipart upload (and of GetObject's `partNumber`): S3's 10 000. */
export const MAX_PART_NUMBER = 10_000;

const partNumberError = (value: string) =>
  new S3Error('InvalidArgument', `Part number must be an integer between 1 and ${MAX_PART_NUMBER}, inclusive`, {
    ArgumentName: 'partNumber',
    ArgumentValue: value,
  });

/** A part number as sent (query argument, path segment): decimal digits, or the InvalidArgument checkPartNumber answers. */
export function readPartNumber(raw: string | null | undefined): number {
  const text = raw ?? '';
  if (!/^\d{1,15}$/.test(text)) throw partNumberError(text);
  return Number(text);
}

/** A part number an upload or a read uses: 1 to MAX_PART_NUMBER (InvalidArgument otherwise). The object layer decides it here. */
export function checkPartNumber(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > MAX_PART_NUMBER) throw partNumberError(String(n));
}

/**
 * The parts a CompleteMultipartUpload lists: at least one (MalformedXML), each a valid part number,
 * strictly ascending (InvalidPartOrder, as S3's "The list of parts was not in ascending order"): a
 * part listed twice is InvalidPartOrder too, as S3-compatible servers checked against S3 answer it
 * (versitygw #1063/#1075, kumo #677/#680).
 */
export function checkPartOrder(parts: ReadonlyArray<{ partNumber: number }>, uploadId: string): void {
  if (!Array.isArray(parts) || parts.length === 0) throw new S3Error('MalformedXML', 'You must specify at least one part');
  let previous = 0;
  for (const part of parts) {
    const n = Number((part as { partNumber?: unknown } | null)?.partNumber);
    checkPartNumber(n);
    if (n <= previous) throw new S3Error('InvalidPartOrder', undefined, { UploadId: uploadId });
    previous = n;
  }
}

/** The bytes a copy-source range names, first and last inclusive. */
export interface CopyRange {
  start: number;
  end: number;
}

/** `x-amz-copy-source-range` as sent: `bytes=first-last` (zero-based, inclusive), or InvalidArgument. */
export function readCopySourceRange(raw: string): CopyRange {
  const m = /^bytes=(\d{1,15})-(\d{1,15})$/.exec(raw.trim());
  if (!m)
    throw new S3Error(
      'InvalidArgument',
      'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and ' +
        'last bytes to copy',
      { ArgumentName: 'x-amz-copy-source-range', ArgumentValue: raw },
    );
  return { start: Number(m[1]), end: Number(m[2]) };
}

/** A copy-source range against its source's size: first not past last, last inside the object (InvalidRange otherwise). */
export function checkCopySourceRange(range: CopyRange, size: number): void {
  if (range.start > range.end || range.end >= size)
    throw new S3Error('InvalidRange', `range bytes=${range.start}-${range.end} is outside the source object of ${size} bytes`);
}

/** Most entries a listing page holds (max-keys, max-uploads, max-parts): S3's 1 000, also the default. */
export const MAX_PAGE_SIZE = 1000;

/** A query argument that must be a whole number (a page size, a part-number marker), else InvalidArgument; `fallback` when absent or empty. */
export function readWholeNumber(raw: string | null | undefined, name: string, fallback: number): number {
  if (raw === undefined || raw === null || raw === '') return fallback;
  if (!/^\d{1,15}$/.test(raw))
    throw new S3Error('InvalidArgument', `Provided ${name} not an integer or within integer range`, { ArgumentName: name, ArgumentValue: raw });
  return Number(raw);
}

/**
 * A listing's page size as sent (`name`: max-keys, max-uploads, max-parts): a whole number; a larger
 * one than MAX_PAGE_SIZE is MAX_PAGE_SIZE (as S3 answers it), and so is none.
 */
export function readPageSize(raw: string | null | undefined, name: string): number {
  return pageSize(readWholeNumber(raw, name, MAX_PAGE_SIZE));
}

/** A page size the object layer serves: MAX_PAGE_SIZE when none is asked, never more, never less than 0. */
export function pageSize(asked: number | undefined): number {
  return asked === undefined || Number.isNaN(asked) ? MAX_PAGE_SIZE : Math.max(0, Math.min(asked, MAX_PAGE_SIZE));
}

/** `Content-MD5` as sent: the base64 of 16 bytes (InvalidDigest otherwise, a repeated header too); undefined when absent. */
export function readContentMd5(raw: string | string[] | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (Array.isArray(raw) || !/^[A-Za-z0-9+/]+=*$/.test(raw) || Buffer.from(raw, 'base64').length !== 16) throw new S3Error('InvalidDigest');
  return raw;
}

/** `Content-MD5` (base64) as the hex digest storage backends compare; InvalidDigest as readContentMd5. */
export function contentMd5Hex(raw: string | string[] | undefined): string | undefined {
  const base64 = readContentMd5(raw);
  return base64 === undefined ? undefined : Buffer.from(base64, 'base64').toString('hex');
}

/**
 * x-service-md5 (an instant upload's claim of the body's MD5): 32 hex digits, lower-cased; anything
 * else is InvalidDigest, wherever it is read (the gateway's edge, the data plane's internal API).
 */
export function readInstantMd5(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!/^[0-9a-fA-F]{32}$/.test(raw)) throw new S3Error('InvalidDigest', 'x-service-md5 must be the hex MD5 of the body (32 hex digits).');
  return raw.toLowerCase();
}
