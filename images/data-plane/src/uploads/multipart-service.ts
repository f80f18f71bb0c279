import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { v7 as uuidv7 } from 'uuid';
import {
  assertObjectKey,
  checksumHeaders,
  compositeChecksum,
  digesting,
  fullObjectChecksum,
  mergeStoredHeaders,
  S3Error,
  startDigest,
  storedChecksum,
  withoutChecksum,
  type ChecksumAlgorithm,
  type Logger,
  type StoredHeaders,
  type Tag,
} from '../../../service-kit/src/index.js';
import type { BackendRegistry } from '../backends/registry.js';
import type { ByteRange, StorageBackend } from '../backends/storage-backend.js';
import { checkPreconditions, type ObjectMeta, type Preconditions } from '../catalog/catalog.js';
import type { Cache } from '../cache/cache.js';
import type { DataPlaneMetrics } from '../metrics.js';
import { MAX_OBJECT_SIZE, checkCopySourceConditions, checkUserMetadata, type CopySourceConditions, type ObjectService } from './object-service.js';

export const MIN_PART_SIZE = 5 * 1024 * 1024;
const MAX_PART_NUMBER = 10_000;
/** An upload expires this long after it was initiated (its cache keys vanish; its part files are swept). */
export const UPLOAD_TTL_S = 7 * 24 * 3600;

interface UploadInfo {
  bucket: string;
  key: string;
  owner: string;
  contentType: string;
  userMetadata: Record<string, string>;
  /** x-amz-tagging of the initiation: the completed object's tags. */
  tags?: Tag[];
  /** Standard headers of the initiation (Cache-Control, ...): the completed object's. */
  headers?: StoredHeaders;
  /** x-amz-checksum-algorithm and -type of the initiation: every part carries one, the object gets one. */
  checksum?: UploadChecksum;
  initiated: string;
  backendKey: string;
}

export interface UploadChecksum {
  algorithm: ChecksumAlgorithm;
  type: 'COMPOSITE' | 'FULL_OBJECT';
}

interface PartInfo {
  partNumber: number;
  etag: string;
  size: number;
  locator: string;
  lastModified: string;
  /** Base64 of the part's checksum by the upload's algorithm (when the upload has one). */
  checksum?: string;
}

/** A part's bytes as they arrive, with the checksum they were checked against. */
export interface PartUpload {
  contentLength?: number;
  contentMd5?: string;
  /** The algorithm of the checksum the part carries (checked by the gateway), if any. */
  checksumAlgorithm?: string;
  /** Its checksum as a stored header, sent before the body or (trailingHeaders) after it. */
  headers?: StoredHeaders;
  trailingHeaders?: () => Promise<StoredHeaders | undefined>;
}

/** A part as CompleteMultipartUpload lists it, with the checksum the client has for it, if any. */
export interface RequestedPart {
  partNumber: number;
  etag: string;
  checksum?: { algorithm: string; value: string };
}

/** Cache keys of one upload share the hash tag {uploadId}: one Redis Cluster shard holds the upload. */
const uploadKey = (uploadId: string) => `strata:mpu:{${uploadId}}`;
const bucketUploadsKey = (bucket: string) => `strata:mpu-bucket:{${bucket}}`;
const partField = (n: number) => `part:${String(n).padStart(5, '0')}`;
const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Multipart uploads: state in the cache (UUID v7 upload ids), parts as temporary blobs on the
 * bucket's backend (not in the blobs table), composed on the backend at completion. Complete and
 * abort remove every part's bytes.
 */
export class MultipartService {
  constructor(
    private readonly cache: Cache,
    private readonly objects: ObjectService,
    private readonly backends: BackendRegistry,
    private readonly metrics: DataPlaneMetrics,
    private readonly logger: Logger,
    private readonly clock: () => Date,
  ) {}

  async initiate(
    bucketName: string,
    key: string,
    opts: { owner?: string; contentType?: string; userMetadata?: Record<string, string>; tags?: Tag[]; headers?: StoredHeaders; checksum?: UploadChecksum },
  ): Promise<string> {
    assertObjectKey(key);
    checkUserMetadata(opts.userMetadata ?? {});
    const { bucket, backend } = await this.objects.bucket(bucketName);
    const uploadId = uuidv7();
    const info: UploadInfo = {
      bucket: bucket.name,
      key,
      owner: opts.owner ?? bucket.owner,
      contentType: opts.contentType || 'application/octet-stream',
      userMetadata: opts.userMetadata ?? {},
      ...(opts.tags?.length ? { tags: opts.tags } : {}),
      ...(opts.headers ? { headers: withoutChecksum(opts.headers) } : {}),
      ...(opts.checksum ? { checksum: opts.checksum } : {}),
      initiated: this.clock().toISOString(),
      backendKey: backend.key,
    };
    await this.cache.hset(uploadKey(uploadId), 'info', JSON.stringify(info));
    await this.cache.expire(uploadKey(uploadId), UPLOAD_TTL_S);
    await this.cache.sadd(bucketUploadsKey(bucket.name), uploadId);
    this.metrics.multipartInFlight.inc();
    return uploadId;
  }

  private async upload(bucket: string, key: string, uploadId: string): Promise<{ info: UploadInfo; backend: StorageBackend }> {
    const raw = UPLOAD_ID.test(uploadId) ? await this.cache.hget(uploadKey(uploadId), 'info') : undefined;
    const info = raw ? (JSON.parse(raw) as UploadInfo) : undefined;
    if (!info || info.bucket !== bucket || info.key !== key) throw new S3Error('NoSuchUpload', undefined, { UploadId: uploadId });
    // A bucket's own backend (operator settings) is rebuilt from the bucket after a restart.
    const backend = this.backends.byBackendKey(info.backendKey) ?? (await this.objects.bucket(bucket)).backend;
    if (backend.key !== info.backendKey) throw new S3Error('NotImplemented', `backend ${info.backendKey} is not available`);
    return { info, backend };
  }

  private async parts(uploadId: string): Promise<PartInfo[]> {
    const all = await this.cache.hgetall(uploadKey(uploadId));
    return Object.entries(all)
      .filter(([field]) => field.startsWith('part:'))
      .map(([, v]) => JSON.parse(v) as PartInfo)
      .sort((a, b) => a.partNumber - b.partNumber);
  }

  private checkPartNumber(n: number): void {
    if (!Number.isInteger(n) || n < 1 || n > MAX_PART_NUMBER) {
      throw new S3Error('InvalidArgument', `Part number must be an integer between 1 and ${MAX_PART_NUMBER}, inclusive`, { ArgumentName: 'partNumber' });
    }
  }

  /**
   * A part's bytes. In an upload created with a checksum algorithm every part must carry a checksum
   * of that algorithm (InvalidRequest before any byte is stored otherwise, as S3); it is kept with the
   * part for CompleteMultipartUpload.
   */
  async uploadPart(bucket: string, key: string, uploadId: string, partNumber: number, body: Readable, opts: PartUpload): Promise<{ etag: string }> {
    this.checkPartNumber(partNumber);
    const { info, backend } = await this.upload(bucket, key, uploadId);
    if (opts.contentLength !== undefined && opts.contentLength > MAX_OBJECT_SIZE) throw new S3Error('EntityTooLarge');
    const wanted = info.checksum?.algorithm;
    if (wanted && opts.checksumAlgorithm !== wanted) {
      throw new S3Error('InvalidRequest', `The upload was created using the ${wanted} checksum algorithm: each part must carry an x-amz-checksum-${wanted.toLowerCase()} checksum.`);
    }
    const stored = await backend.put(body, { expectedMd5: opts.contentMd5, expectedSize: opts.contentLength, maxSize: MAX_OBJECT_SIZE, part: true });
    this.metrics.bytesIn.inc(stored.size);
    let checksum: string | undefined;
    if (wanted) {
      try {
        checksum = storedChecksum(mergeStoredHeaders(opts.headers, await opts.trailingHeaders?.()))?.value;
        if (checksum === undefined) throw new S3Error('InvalidRequest', `The part's ${wanted} checksum did not arrive.`);
      } catch (err) {
        await backend.delete(stored.locator).catch(() => undefined);
        throw err;
      }
    }
    await this.savePart(uploadId, backend, { partNumber, etag: stored.md5, size: stored.size, locator: stored.locator, lastModified: this.clock().toISOString(), ...(checksum ? { checksum } : {}) });
    return { etag: stored.md5 };
  }

  /** UploadPartCopy: a byte range of an existing object becomes a part. */
  async uploadPartCopy(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    source: { bucket: string; key: string; range?: string; conditions?: CopySourceConditions },
  ): Promise<{ etag: string; lastModified: string }> {
    this.checkPartNumber(partNumber);
    const { info, backend } = await this.upload(bucket, key, uploadId);
    const { object, backend: sourceBackend } = await this.objects.head(source.bucket, source.key);
    checkCopySourceConditions(source.conditions, object);
    let range: ByteRange | undefined;
    if (source.range !== undefined) {
      const m = /^bytes=(\d+)-(\d+)$/.exec(source.range.trim());
      if (!m) throw new S3Error('InvalidArgument', 'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy');
      range = { start: Number(m[1]), end: Number(m[2]) };
      if (range.start > range.end || range.end >= object.size) throw new S3Error('InvalidRange', `range ${source.range} is outside the source object of ${object.size} bytes`);
    }
    const expectedSize = range ? range.end - range.start + 1 : object.size;
    const bytes = await sourceBackend.get(object.locator, range);
    // An upload with a checksum algorithm: the copied bytes get their checksum on the way.
    const digest = info.checksum && startDigest(info.checksum.algorithm);
    const stored = await backend.put(digest ? digesting(bytes, digest) : bytes, { expectedSize, part: true });
    this.metrics.bytesIn.inc(stored.size);
    const lastModified = this.clock().toISOString();
    const checksum = digest ? Buffer.from(await digest.digest()).toString('base64') : undefined;
    await this.savePart(uploadId, backend, { partNumber, etag: stored.md5, size: stored.size, locator: stored.locator, lastModified, ...(checksum ? { checksum } : {}) });
    return { etag: stored.md5, lastModified, ...(checksum && info.checksum ? { checksum: { algorithm: info.checksum.algorithm, value: checksum } } : {}) };
  }

  private async savePart(uploadId: string, backend: StorageBackend, part: PartInfo): Promise<void> {
    const key = uploadKey(uploadId);
    const previous = await this.cache.hget(key, partField(part.partNumber));
    await this.cache.hset(key, partField(part.partNumber), JSON.stringify(part));
    // Aborted or completed while this part was streaming: its bytes must not stay behind.
    if (!(await this.cache.hget(key, 'info'))) {
      await this.cache.del(key);
      await backend.delete(part.locator);
      throw new S3Error('NoSuchUpload', undefined, { UploadId: uploadId });
    }
    if (previous) {
      const old = JSON.parse(previous) as PartInfo;
      if (old.locator !== part.locator) await backend.delete(old.locator);
    }
  }

  async listParts(bucket: string, key: string, uploadId: string, opts: { maxParts?: number; partNumberMarker?: number }) {
    const { info } = await this.upload(bucket, key, uploadId);
    const maxParts = Math.max(0, Math.min(opts.maxParts ?? 1000, 1000));
    const after = opts.partNumberMarker ?? 0;
    const all = (await this.parts(uploadId)).filter((p) => p.partNumber > after);
    const page = all.slice(0, maxParts);
    const isTruncated = all.length > page.length;
    return {
      parts: page.map(({ partNumber, etag, size, lastModified, checksum }) => ({ partNumber, etag, size, lastModified, ...(checksum ? { checksum } : {}) })),
      ...(info.checksum ? { checksumAlgorithm: info.checksum.algorithm, checksumType: info.checksum.type } : {}),
      isTruncated,
      ...(isTruncated ? { nextPartNumberMarker: page.at(-1)?.partNumber ?? after } : {}),
      initiated: info.initiated,
      owner: info.owner,
      contentType: info.contentType,
    };
  }

  /**
   * Compose the chosen parts into the object. With conditions (If-Match / If-None-Match, S3's
   * conditional writes) the commit checks them atomically; they are also checked before composing, so
   * that a write that cannot succeed does not copy the parts first. A failed condition leaves the
   * upload in progress, as S3 does.
   */
  async complete(
    bucketName: string,
    key: string,
    uploadId: string,
    requested: RequestedPart[],
    conditions?: Preconditions,
    /** The whole object's checksum as the client computed it (x-amz-checksum-* on the Complete request). */
    expectedChecksum?: { algorithm: string; value: string },
  ): Promise<ObjectMeta> {
    const { info, backend } = await this.upload(bucketName, key, uploadId);
    if (!Array.isArray(requested) || requested.length === 0) throw new S3Error('MalformedXML', 'You must specify at least one part');
    const stored = new Map((await this.parts(uploadId)).map((p) => [p.partNumber, p]));
    const chosen: PartInfo[] = [];
    let previous = 0;
    for (const r of requested) {
      const n = Number(r?.partNumber);
      if (!Number.isInteger(n) || n <= previous) throw new S3Error('InvalidPartOrder', undefined, { UploadId: uploadId });
      previous = n;
      const part = stored.get(n);
      const etag = String(r.etag ?? '').replace(/^"|"$/g, '').toLowerCase();
      if (!part || part.etag !== etag) throw new S3Error('InvalidPart', undefined, { UploadId: uploadId, PartNumber: String(n), ETag: etag });
      // A checksum the client lists for a part must be the one the part was uploaded with.
      if (info.checksum && r.checksum && (r.checksum.algorithm !== info.checksum.algorithm || r.checksum.value !== part.checksum)) {
        throw new S3Error('InvalidPart', `The ${r.checksum.algorithm} checksum listed for part ${n} is not the one it was uploaded with.`, { UploadId: uploadId, PartNumber: String(n), ETag: etag });
      }
      chosen.push(part);
    }
    chosen.slice(0, -1).forEach((p) => {
      if (p.size < MIN_PART_SIZE) {
        throw new S3Error('EntityTooSmall', undefined, { UploadId: uploadId, PartNumber: String(p.partNumber), ProposedSize: String(p.size), MinSizeAllowed: String(MIN_PART_SIZE) });
      }
    });
    const etag = `${createHash('md5')
      .update(Buffer.concat(chosen.map((p) => Buffer.from(p.etag, 'hex'))))
      .digest('hex')}-${chosen.length}`;
    const checksum = info.checksum && (await this.objectChecksum(info.checksum, chosen, expectedChecksum));
    const { bucket } = await this.objects.bucket(bucketName);
    if (conditions) {
      const current = await this.objects.head(bucketName, key).then(
        ({ object }) => object.etag,
        (err: unknown) => {
          if (err instanceof S3Error && err.code === 'NoSuchKey') return undefined;
          throw err;
        },
      );
      checkPreconditions(conditions, current, key);
    }
    const composed = await backend.compose(chosen.map((p) => p.locator));
    const meta = await this.objects.commit(
      {
        bucket,
        key,
        owner: info.owner,
        contentType: info.contentType,
        userMetadata: info.userMetadata,
        tags: info.tags,
        headers: mergeStoredHeaders(info.headers, checksum && checksumHeaders(checksum)),
        blob: this.objects.newBlob(backend, bucket, composed),
        etag,
        md5: composed.md5,
        size: composed.size,
        partSizes: chosen.map((p) => p.size),
        ...(checksum ? { partChecksums: chosen.map((p) => p.checksum!) } : {}),
        conditions,
      },
      composed,
      backend,
    );
    await this.discard(bucketName, uploadId, backend, [...stored.values()]);
    return meta;
  }

  /**
   * The object's checksum from its parts': COMPOSITE (a checksum of the parts' checksums, `-N`) or
   * FULL_OBJECT (the CRC of all its bytes, combined from the parts' CRCs). One the client sent for the
   * whole object must match (BadDigest, the upload stays in progress).
   */
  private async objectChecksum(upload: UploadChecksum, parts: PartInfo[], expected: { algorithm: string; value: string } | undefined) {
    if (parts.some((p) => p.checksum === undefined)) throw new S3Error('InvalidPart', `Every part of this upload needs its ${upload.algorithm} checksum.`);
    const value =
      upload.type === 'COMPOSITE'
        ? await compositeChecksum(upload.algorithm, parts.map((p) => p.checksum!))
        : fullObjectChecksum(upload.algorithm, parts.map((p) => ({ value: p.checksum!, size: p.size })));
    if (expected) {
      if (expected.algorithm !== upload.algorithm) throw new S3Error('InvalidRequest', `The upload was created using the ${upload.algorithm} checksum algorithm, not ${expected.algorithm}.`);
      // (A composite checksum may be sent with or without its `-N`.)
      if (expected.value !== value && `${expected.value}-${parts.length}` !== value) {
        throw new S3Error('BadDigest', `The ${upload.algorithm} you specified for the whole object did not match the one calculated from its parts.`);
      }
    }
    return { algorithm: upload.algorithm, value, type: upload.type };
  }

  async abort(bucket: string, key: string, uploadId: string): Promise<void> {
    const { backend } = await this.upload(bucket, key, uploadId);
    await this.discard(bucket, uploadId, backend, await this.parts(uploadId));
  }

  /**
   * Abort the bucket's uploads whose key starts with `prefix` and that were initiated at or before
   * `initiatedNoLaterThan` (a lifecycle rule's AbortIncompleteMultipartUpload); answers how many.
   */
  async abortInitiatedBefore(bucketName: string, prefix: string, initiatedNoLaterThan: Date): Promise<number> {
    const { bucket } = await this.objects.bucket(bucketName);
    let aborted = 0;
    for (const u of await this.uploadsOf(bucket.name)) {
      if (!u.info.key.startsWith(prefix) || new Date(u.info.initiated) > initiatedNoLaterThan) continue;
      try {
        await this.abort(bucket.name, u.info.key, u.uploadId);
        aborted++;
      } catch (err) {
        // Completed or aborted meanwhile.
        if (!(err instanceof S3Error && err.code === 'NoSuchUpload')) throw err;
      }
    }
    if (aborted > 0) this.logger.info({ bucket: bucket.name, prefix, aborted }, 'expired multipart uploads aborted');
    return aborted;
  }

  /** The bucket's uploads still in progress (ids whose upload expired are dropped from its set). */
  private async uploadsOf(bucket: string): Promise<Array<{ uploadId: string; info: UploadInfo }>> {
    const uploads: Array<{ uploadId: string; info: UploadInfo }> = [];
    for (const uploadId of await this.cache.smembers(bucketUploadsKey(bucket))) {
      const raw = await this.cache.hget(uploadKey(uploadId), 'info');
      if (raw) uploads.push({ uploadId, info: JSON.parse(raw) as UploadInfo });
      else await this.cache.srem(bucketUploadsKey(bucket), uploadId);
    }
    return uploads;
  }

  private async discard(bucket: string, uploadId: string, backend: StorageBackend, parts: PartInfo[]): Promise<void> {
    const removed = await this.cache.del(uploadKey(uploadId));
    await this.cache.srem(bucketUploadsKey(bucket), uploadId);
    if (removed > 0) this.metrics.multipartInFlight.dec();
    for (const p of parts) {
      await backend.delete(p.locator).catch((err) => this.logger.warn({ err, uploadId }, 'could not remove a part'));
    }
  }

  /**
   * ListMultipartUploads: in byte order of key, then upload id, after the markers; with a delimiter,
   * the keys that hold it after the prefix are rolled up into common prefixes, each counted as one entry
   * (a key marker that is such a prefix continues after everything under it, as S3).
   */
  async listUploads(bucketName: string, opts: { prefix?: string; delimiter?: string; keyMarker?: string; uploadIdMarker?: string; maxUploads?: number }) {
    const { bucket } = await this.objects.bucket(bucketName);
    const prefix = opts.prefix ?? '';
    const delimiter = opts.delimiter || undefined;
    const maxUploads = Math.min(opts.maxUploads ?? 1000, 1000);
    const uploads = (await this.uploadsOf(bucket.name))
      .filter((u) => u.info.key.startsWith(prefix))
      .map(({ uploadId, info }) => ({ key: info.key, uploadId, initiated: info.initiated, owner: info.owner }));
    const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
    uploads.sort((a, b) => byteOrder(a.key, b.key) || byteOrder(a.uploadId, b.uploadId));
    const markerIsPrefix = delimiter !== undefined && opts.keyMarker !== undefined && opts.keyMarker.endsWith(delimiter);
    const after = uploads.filter((u) => {
      if (opts.keyMarker === undefined) return true;
      if (markerIsPrefix && u.key.startsWith(opts.keyMarker)) return false;
      const c = byteOrder(u.key, opts.keyMarker);
      return c > 0 || (c === 0 && opts.uploadIdMarker !== undefined && u.uploadId > opts.uploadIdMarker);
    });
    const page: typeof uploads = [];
    const commonPrefixes: string[] = [];
    let isTruncated = false;
    let last: { key: string; uploadId?: string } | undefined;
    for (const u of after) {
      const at = delimiter === undefined ? -1 : u.key.indexOf(delimiter, prefix.length);
      const common = at >= 0 ? u.key.slice(0, at + delimiter!.length) : undefined;
      if (common !== undefined && common === commonPrefixes[commonPrefixes.length - 1]) continue;
      if (page.length + commonPrefixes.length === maxUploads) {
        isTruncated = true;
        break;
      }
      if (common !== undefined) {
        commonPrefixes.push(common);
        last = { key: common };
      } else {
        page.push(u);
        last = { key: u.key, uploadId: u.uploadId };
      }
    }
    return {
      uploads: page,
      commonPrefixes,
      isTruncated,
      ...(isTruncated && last ? { nextKeyMarker: last.key, ...(last.uploadId ? { nextUploadIdMarker: last.uploadId } : {}) } : {}),
    };
  }

}
