import type { FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { S3Error, type StoredHeaders } from '../../../object-model/src/index.js';

/** What a backend answers for stored bytes: its own name for them, their size and hex MD5 (null when the backend did not hash them). */
export interface StoredBlob {
  locator: string;
  size: number;
  md5: string | null;
  /**
   * The bytes themselves, when the backend keeps this blob inline (small bodies on the filesystem
   * backend): they are stored with the blob's database row, and the backend holds nothing.
   */
  inline?: Buffer;
}

/** Bytes that streamed through Strata: their MD5 is always known. */
export interface HashedBlob extends StoredBlob {
  md5: string;
}

export interface PutOptions {
  /** Hex MD5 the body must have (Content-MD5): on mismatch BadDigest and nothing is stored. */
  expectedMd5?: string;
  /** Bytes the body must have (Content-Length): fewer → IncompleteBody, more → rejected; nothing stored. */
  expectedSize?: number;
  /** Upper bound on the size (EntityTooLarge beyond it). */
  maxSize?: number;
  /**
   * A multipart part: bytes that live only until the upload completes or is aborted. Backends keep
   * them apart so that parts of uploads that expired unfinished can be swept by age.
   */
  part?: boolean;
  /**
   * The caller needs no MD5 of these bytes (encrypted bodies: their blobs keep none), so a backend may
   * skip hashing them; the blob's `md5` is then null (and an `expectedMd5` fails as BadDigest: the
   * caller checks its own digest).
   */
  unhashed?: boolean;
}

/** Inclusive byte range. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Where object bytes live. Blobs are named by generated locators (never by keys), written so that a
 * crash or an aborted body never leaves a partial blob visible, and read as streams.
 * Implementations: the local filesystem (fs-backend.ts) and S3-compatible servers or cloud stores
 * through the minio client (s3-backend.ts); registry.ts picks one per bucket.
 */
export interface StorageBackend {
  /** Identity of the storage the bytes land in: blobs dedupe only within one backend key. */
  readonly key: string;
  /** Stream a body into a new blob, hashing it on the way (unless `unhashed`); nothing remains on any error. */
  put(body: Readable, opts: PutOptions & { unhashed: true }): Promise<StoredBlob>;
  put(body: Readable, opts?: PutOptions): Promise<HashedBlob>;
  /** Stream a blob, or a byte range of it; BlobMissingError when its bytes are not there. */
  get(locator: string, range?: ByteRange): Promise<Readable>;
  /**
   * The blob's file, open for reading (the caller closes it), for readers that read it off the event loop
   * themselves (encrypted reads: the encryption threads pread it); undefined when its bytes are not a
   * file of their own (kept inline, or on a remote store). BlobMissingError when its bytes are not there.
   */
  openFile?(locator: string): Promise<FileHandle | undefined>;
  /** Remove a blob; removing a missing blob is not an error. */
  delete(locator: string): Promise<void>;
  /**
   * Concatenate blobs (multipart parts) into one new blob, on the backend itself (MD5 null when the backend
   * cannot hash it, or need not: `unhashed`, as for put).
   */
  compose(locators: string[], opts?: { unhashed?: boolean }): Promise<StoredBlob>;
  exists(locator: string): Promise<boolean>;
  /** A URL a client can download the blob from directly, when the backend can serve it. */
  directUrl?(locator: string, expiresSeconds: number, opts?: { contentType?: string; headers?: StoredHeaders }): Promise<string>;
  /** The backend answers (and is set up); throws S3 ServiceUnavailable when it cannot be reached. */
  ready?(): Promise<void>;
  /** Remove part blobs older than `maxAgeMs` (uploads that expired unfinished); answers how many. */
  removeStaleParts?(maxAgeMs: number): Promise<number>;
}

/**
 * A blob a row names whose bytes are not on its backend (lost: deleted by hand, a volume restored without
 * them): thrown by `get`. Not the reader's fault and not a bug of the request: answered 503 with a
 * message that says so (toS3Error), and logged at error as the data loss it is. 503 rather than 500 or
 * 404: the object exists, and its bytes can come back (a remounted volume, a restore, or an upload of
 * the same content, which repairs the blob: Catalog.repairBlob), so a client's bounded retries are right.
 */
export class BlobMissingError extends Error {
  constructor(
    readonly backendKey: string,
    readonly locator: string,
  ) {
    super(`blob ${locator} is missing on storage backend ${backendKey}`);
    this.name = 'BlobMissingError';
  }

  toS3Error(): S3Error {
    return new S3Error('ServiceUnavailable', "The object's data is not available on its storage backend; the operator has been alerted.");
  }
}
