import { S3Error } from './s3-errors.js';
import { WEBSITE_REDIRECT_HEADER, type StoredHeaders } from './stored-headers.js';

/** Largest object a single PUT (or copy) stores, and the largest part: S3's 5 GiB. */
export const MAX_OBJECT_SIZE = 5 * 1024 ** 3;

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
