import type { Readable } from 'node:stream';
import { v7 as uuidv7 } from 'uuid';
import { type Logger } from '../../../service-kit/src/index.js';
import {
  assertObjectKey,
  checkCopySourceConditions,
  checkCopySourceRange,
  checkObjectSize,
  checkPartNumber,
  checksumHeaders,
  checkUserMetadata,
  digesting,
  MAX_OBJECT_SIZE,
  mergeStoredHeaders,
  pageSize,
  readCopySourceRange,
  S3Error,
  startDigest,
  storedChecksum,
  withoutChecksum,
  type ObjectConditions,
  type StoredHeaders,
  checkWriteConditions,
  ENCRYPTION_ENTRY,
  splitEncryption,
  type SseAnswer,
  type SseRequest,
  type WriteConditions,
} from '../../../object-model/src/index.js';
import type { BackendRegistry } from '../backends/registry.js';
import type { StorageBackend } from '../backends/storage-backend.js';
import { type BucketRef, type ObjectMeta } from '../catalog/catalog.js';
import type { Cache } from '../cache/cache.js';
import type { DataPlaneMetrics } from '../metrics.js';
import { chosenParts, multipartEtag, objectChecksum, type RequestedPart } from './completion.js';
import type { ObjectService } from './object-service.js';
import { uploadListingPage, type UploadListingQuery } from './upload-listing.js';
import { DEFAULT_UPLOADS_PER_ACCOUNT, UploadState, type InitiateOptions, type PartInfo, type UploadInfo } from './upload-state.js';

export { UPLOAD_TTL_S, type UploadChecksum } from './upload-state.js';
export { MIN_PART_SIZE, type RequestedPart } from './completion.js';

/** A part's bytes as they arrive, with the checksum they were checked against. */
export interface PartUpload {
  contentLength?: number;
  contentMd5?: string;
  /** The algorithm of the checksum the part carries (checked by the gateway), if any. */
  checksumAlgorithm?: string;
  /** Its checksum as a stored header, sent before the body or (trailingHeaders) after it. */
  headers?: StoredHeaders;
  trailingHeaders?: () => Promise<StoredHeaders | undefined>;
  /** The customer key of an SSE-C upload (every part brings it, as S3 requires). */
  sse?: SseRequest;
  /** The bucket as the gateway resolved and authorised it (x-strata-bucket); without it the name is looked up. */
  resolvedBucket?: BucketRef;
}

/** A request's bucket and its backend (ObjectService.bucket), resolved once per request, on first use. */
type RequestBucket = () => Promise<{ bucket: BucketRef; backend: StorageBackend }>;

/** What a Complete checks besides its parts: If-Match / If-None-Match, and the whole object's checksum as the client computed it. */
export interface CompletionChecks {
  conditions?: WriteConditions;
  expectedChecksum?: { algorithm: string; value: string };
  /** No account signed the completion: the object lands only in the bucket resolved for it, as an upload begun anonymously. */
  anonymous?: boolean;
}

/** How a part's bytes are checked, and the customer key of an SSE-C upload. */
type PartStore = { expectedMd5?: string; expectedSize?: number; customerKey?: string };

export interface MultipartLimits {
  /** In-progress uploads one account (a bucket owner) may have at once; default DEFAULT_UPLOADS_PER_ACCOUNT. */
  uploadsPerAccount?: number;
}

/**
 * Multipart uploads: state in the cache (UUID v7 upload ids, see UploadState), parts as temporary
 * blobs on the bucket's backend (not in the blobs table), composed on the backend at completion.
 * An upload belongs to the bucket id it was started in. Complete and abort remove every part's bytes;
 * a committed Complete is never answered with an error, and its retries get its result again.
 */
export class MultipartService {
  private readonly state: UploadState;
  private readonly uploadsPerAccount: number;
  /** The save in progress per upload and part number (see savePart). */
  private readonly partSaves = new Map<string, Promise<void>>();

  constructor(
    cache: Cache,
    private readonly objects: ObjectService,
    private readonly backends: BackendRegistry,
    private readonly metrics: DataPlaneMetrics,
    private readonly logger: Logger,
    private readonly clock: () => Date,
    limits: MultipartLimits = {},
  ) {
    this.state = new UploadState(cache, clock);
    this.uploadsPerAccount = limits.uploadsPerAccount ?? DEFAULT_UPLOADS_PER_ACCOUNT;
  }

  /** `resolved`: the bucket as the gateway resolved and authorised it (x-strata-bucket), else the name's current one. */
  async initiate(bucketName: string, key: string, opts: InitiateOptions, resolved?: BucketRef): Promise<{ uploadId: string; sse?: SseAnswer }> {
    assertObjectKey(key);
    checkUserMetadata(opts.userMetadata ?? {});
    const { bucket, backend } = await this.objects.bucket(bucketName, resolved);
    // One data key for the upload (its record, wrapped, with the upload's state); each part is its own segment.
    const sealed = await this.objects.encryption.seal(opts.sse, bucket.encryption);
    const headers = mergeStoredHeaders(withoutChecksum(opts.headers), sealed && { [ENCRYPTION_ENTRY]: JSON.stringify(sealed.record) });
    const uploadId = uuidv7();
    const info: UploadInfo = {
      bucketId: bucket.id,
      bucket: bucket.name,
      key,
      owner: opts.owner ?? bucket.owner,
      ...(opts.anonymous ? { anonymous: true } : {}),
      contentType: opts.contentType || 'application/octet-stream',
      userMetadata: opts.userMetadata ?? {},
      ...(opts.tags?.length ? { tags: opts.tags } : {}),
      ...(headers ? { headers } : {}),
      ...(opts.checksum ? { checksum: opts.checksum } : {}),
      initiated: this.clock().toISOString(),
      backendKey: backend.key,
      account: bucket.owner,
    };
    await this.state.create(uploadId, info, this.uploadsPerAccount);
    this.metrics.multipartInFlight.inc();
    const { sse } = splitEncryption(headers);
    return { uploadId, ...(sse ? { sse } : {}) };
  }

  /**
   * The request's bucket, resolved at most once and only when first asked: the record the gateway
   * authorised (x-strata-bucket) when it sent one, else the name's current bucket.
   */
  private requestBucket(name: string, resolved?: BucketRef): RequestBucket {
    let target: ReturnType<RequestBucket> | undefined;
    return () => (target ??= this.objects.bucket(name, resolved));
  }

  /**
   * The upload `uploadId` of `key` in the request's bucket: NoSuchUpload unless it was started in this
   * very bucket (not in a deleted one of the same name; state of uploads started before uploads carried
   * their bucket id has none and is not found either).
   */
  private async upload(target: RequestBucket, key: string, uploadId: string): Promise<{ info: UploadInfo; backend: StorageBackend }> {
    const info = await this.state.info(uploadId);
    const current = info && (await target());
    if (!info || !current || info.bucketId !== current.bucket.id || info.key !== key) throw new S3Error('NoSuchUpload', undefined, { UploadId: uploadId });
    // A bucket's own backend (operator settings) is rebuilt from the bucket after a restart.
    const backend = this.backends.byBackendKey(info.backendKey) ?? current.backend;
    if (backend.key !== info.backendKey) throw new S3Error('NotImplemented', `backend ${info.backendKey} is not available`);
    return { info, backend };
  }

  /**
   * A part's bytes. In an upload created with a checksum algorithm every part must carry a checksum
   * of that algorithm (InvalidRequest before any byte is stored otherwise, as S3); it is kept with the
   * part for CompleteMultipartUpload.
   */
  async uploadPart(bucket: string, key: string, uploadId: string, partNumber: number, body: Readable, opts: PartUpload): Promise<{ etag: string }> {
    checkPartNumber(partNumber);
    const { info, backend } = await this.upload(this.requestBucket(bucket, opts.resolvedBucket), key, uploadId);
    checkObjectSize(opts.contentLength);
    const wanted = info.checksum?.algorithm;
    if (wanted && opts.checksumAlgorithm !== wanted) {
      throw new S3Error(
        'InvalidRequest',
        `The upload was created using the ${wanted} checksum algorithm: each part must carry an x-amz-checksum-${wanted.toLowerCase()} checksum.`,
      );
    }
    const stored = await this.storePart(body, info, backend, {
      expectedMd5: opts.contentMd5,
      expectedSize: opts.contentLength,
      customerKey: opts.sse?.customerKey,
    });
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
    await this.savePart(uploadId, backend, {
      partNumber,
      etag: stored.md5,
      size: stored.size,
      locator: stored.locator,
      lastModified: this.clock().toISOString(),
      ...(checksum ? { checksum } : {}),
    });
    return { etag: stored.md5 };
  }

  /** UploadPartCopy: a byte range of an existing object becomes a part. */
  async uploadPartCopy(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    source: {
      bucket: string;
      key: string;
      range?: string;
      conditions?: ObjectConditions;
      sse?: SseRequest;
      /** The destination and source buckets as the gateway resolved and authorised them. */
      resolvedBucket?: BucketRef;
      resolvedSourceBucket?: BucketRef;
    },
  ): Promise<{ etag: string; lastModified: string }> {
    checkPartNumber(partNumber);
    const { info, backend } = await this.upload(this.requestBucket(bucket, source.resolvedBucket), key, uploadId);
    const { object, backend: sourceBackend } = await this.objects.head(source.bucket, source.key, source.resolvedSourceBucket);
    checkCopySourceConditions(source.conditions, object);
    const range = source.range !== undefined ? readCopySourceRange(source.range) : undefined;
    if (range) checkCopySourceRange(range, object.size);
    const expectedSize = range ? range.end - range.start + 1 : object.size;
    // The source's plaintext (its customer key if SSE-C), stored as the upload stores its parts.
    const sourceKey = await this.objects.encryption.open(object.encryption, source.sse?.copySourceCustomerKey);
    const bytes = await this.objects.read(object, sourceBackend, range, sourceKey);
    // An upload with a checksum algorithm: the copied bytes get their checksum on the way.
    const digest = info.checksum && startDigest(info.checksum.algorithm);
    const stored = await this.storePart(digest ? digesting(bytes, digest) : bytes, info, backend, { expectedSize, customerKey: source.sse?.customerKey });
    const lastModified = this.clock().toISOString();
    const checksum = digest ? Buffer.from(await digest.digest()).toString('base64') : undefined;
    await this.savePart(uploadId, backend, {
      partNumber,
      etag: stored.md5,
      size: stored.size,
      locator: stored.locator,
      lastModified,
      ...(checksum ? { checksum } : {}),
    });
    return { etag: stored.md5, lastModified, ...(checksum && info.checksum ? { checksum: { algorithm: info.checksum.algorithm, value: checksum } } : {}) };
  }

  /** A part's bytes, encrypted as a segment of its own when the upload is; the ETag and size are then its plaintext's. */
  private async storePart(body: Readable, info: UploadInfo, backend: StorageBackend, { customerKey, ...opts }: PartStore) {
    const record = info.headers?.[ENCRYPTION_ENTRY];
    const dataKey = await this.objects.encryption.open(record, customerKey);
    if (dataKey && record) {
      const encrypted = await this.objects.storeEncrypted(body, { dataKey, record: JSON.parse(record) }, backend, {
        ...opts,
        part: true,
        tenant: info.owner,
      });
      return { locator: encrypted.stored.locator, md5: encrypted.plainMd5, size: encrypted.size };
    }
    const stored = await backend.put(body, { ...opts, maxSize: MAX_OBJECT_SIZE, part: true });
    this.metrics.bytesIn.inc(stored.size);
    return stored;
  }

  /**
   * Record a part, removing the bytes of the one it replaces. Saves of one part number run one at a time
   * here, so that of concurrent uploads of it (a client that reset and retried while the first still
   * ran) each replaced one's bytes are removed at once. (Across data planes, a loser whose record the
   * winner overwrote unseen is still left to the part sweep.)
   */
  private async savePart(uploadId: string, backend: StorageBackend, part: PartInfo): Promise<void> {
    const lock = `${uploadId}/${part.partNumber}`;
    const mine = (this.partSaves.get(lock) ?? Promise.resolve()).then(() => this.replacePart(uploadId, backend, part));
    const done = mine.then(
      () => undefined,
      () => undefined,
    );
    this.partSaves.set(lock, done);
    try {
      await mine;
    } finally {
      if (this.partSaves.get(lock) === done) this.partSaves.delete(lock);
    }
  }

  private async replacePart(uploadId: string, backend: StorageBackend, part: PartInfo): Promise<void> {
    const previous = await this.state.part(uploadId, part.partNumber);
    // Aborted or completed while this part was streaming: its bytes must not stay behind.
    if (!(await this.state.savePart(uploadId, part))) {
      await backend.delete(part.locator);
      throw new S3Error('NoSuchUpload', undefined, { UploadId: uploadId });
    }
    if (previous && previous.locator !== part.locator) await backend.delete(previous.locator);
  }

  async listParts(bucket: string, key: string, uploadId: string, opts: { maxParts?: number; partNumberMarker?: number }, resolved?: BucketRef) {
    const { info } = await this.upload(this.requestBucket(bucket, resolved), key, uploadId);
    const maxParts = pageSize(opts.maxParts);
    const after = opts.partNumberMarker ?? 0;
    const all = (await this.state.parts(uploadId)).filter((p) => p.partNumber > after);
    const page = all.slice(0, maxParts);
    const isTruncated = all.length > page.length;
    return {
      parts: page.map(({ partNumber, etag, size, lastModified, checksum }) => ({ partNumber, etag, size, lastModified, ...(checksum ? { checksum } : {}) })),
      ...(info.checksum ? { checksumAlgorithm: info.checksum.algorithm, checksumType: info.checksum.type } : {}),
      isTruncated,
      ...(isTruncated ? { nextPartNumberMarker: page.at(-1)?.partNumber ?? after } : {}),
      initiated: info.initiated,
      owner: info.owner,
      ...(info.anonymous ? { anonymous: true } : {}),
      contentType: info.contentType,
    };
  }

  /**
   * Compose the chosen parts into the object. With conditions (If-Match / If-None-Match, S3's
   * conditional writes) the commit checks them atomically; they are also checked before composing, so
   * that a write that cannot succeed does not copy the parts first. A failed condition leaves the
   * upload in progress, as S3 does. `resolved`: the bucket as the gateway resolved and authorised it,
   * the one bucket every step below works on.
   */
  async complete(
    bucketName: string,
    key: string,
    uploadId: string,
    requested: RequestedPart[],
    { conditions, expectedChecksum, anonymous }: CompletionChecks = {},
    resolved?: BucketRef,
  ): Promise<ObjectMeta> {
    const target = this.requestBucket(bucketName, resolved);
    const retried = await this.completedBefore(target, key, uploadId);
    if (retried) return retried;
    const { info, backend } = await this.upload(target, key, uploadId);
    const stored = new Map((await this.state.parts(uploadId)).map((p) => [p.partNumber, p]));
    const chosen = chosenParts(uploadId, info, requested, stored);
    const etag = multipartEtag(chosen);
    const checksum = info.checksum && (await objectChecksum(info.checksum, chosen, expectedChecksum));
    const { bucket } = await target();
    if (conditions) {
      const current = await this.objects.head(bucketName, key, bucket).then(
        ({ object }) => object.etag,
        (err: unknown) => {
          if (err instanceof S3Error && err.code === 'NoSuchKey') return undefined;
          throw err;
        },
      );
      checkWriteConditions(conditions, current, key);
    }
    const encrypted = info.headers?.[ENCRYPTION_ENTRY] !== undefined;
    // Encrypted parts: the MD5 of their ciphertext would be kept from instant upload and dedupe anyway, so it is not computed.
    const composed = await backend.compose(
      chosen.map((p) => p.locator),
      { unhashed: encrypted },
    );
    const meta = await this.objects.commit(
      {
        bucket,
        key,
        owner: info.owner,
        // An anonymous upload (or completion) lands only in the bucket whose ACL admitted it, never one created again since.
        anonymous: info.anonymous || anonymous,
        contentType: info.contentType,
        userMetadata: info.userMetadata,
        tags: info.tags,
        headers: mergeStoredHeaders(info.headers, checksum && checksumHeaders(checksum)),
        // (An encrypted blob keeps no MD5: its bytes are its data key's alone.)
        blob: { ...this.objects.newBlob(backend, bucket, composed), ...(encrypted ? { md5: null } : {}) },
        etag,
        md5: encrypted ? null : composed.md5,
        size: encrypted ? chosen.reduce((sum, p) => sum + p.size, 0) : composed.size,
        partSizes: chosen.map((p) => p.size),
        ...(checksum ? { partChecksums: chosen.map((p) => p.checksum!) } : {}),
        conditions,
      },
      composed,
      backend,
    );
    await this.afterCommit(uploadId, info, backend, [...stored.values()], meta);
    return meta;
  }

  /**
   * A Complete of an upload already completed in this bucket (a client's retry) answers what the
   * first one did, and finishes its cleanup if that was left undone.
   */
  private async completedBefore(target: RequestBucket, key: string, uploadId: string): Promise<ObjectMeta | undefined> {
    const done = await this.state.completed(uploadId);
    if (!done || done.key !== key || done.bucketId !== (await target()).bucket.id) return undefined;
    const info = await this.state.info(uploadId);
    if (info) await this.afterCommit(uploadId, info, ...(await this.partsOnBackend(uploadId, info)), done.meta);
    return done.meta;
  }

  /**
   * After the object is committed, nothing may turn the Complete into an error: its result is kept
   * for retries, then the upload's state and parts go. A failure here is logged and left: while the
   * result is not kept the upload stays (a retry completes it again, from the same parts); once it is,
   * a retry or a listing finishes the cleanup, and parts left behind go with the part sweep.
   */
  private async afterCommit(uploadId: string, info: UploadInfo, backend: StorageBackend | undefined, parts: PartInfo[], meta: ObjectMeta): Promise<void> {
    try {
      await this.state.recordCompleted(uploadId, { bucketId: info.bucketId, key: info.key, meta });
      await this.discard(uploadId, info, backend, parts);
    } catch (err) {
      this.logger.warn({ err, uploadId }, 'completed upload: cleanup left for a retry, a listing or the part sweep');
    }
  }

  async abort(bucket: string, key: string, uploadId: string, resolved?: BucketRef): Promise<void> {
    await this.abortIn(this.requestBucket(bucket, resolved), key, uploadId);
  }

  private async abortIn(target: RequestBucket, key: string, uploadId: string): Promise<void> {
    const { info, backend } = await this.upload(target, key, uploadId);
    await this.discard(uploadId, info, backend, await this.state.parts(uploadId));
  }

  /**
   * Abort every upload of a bucket that was deleted (DeleteBucket, as S3, ends its uploads); answers
   * how many. Parts on a backend this process cannot reach now are left to the part sweep.
   */
  async abortAllOf(bucketId: number): Promise<number> {
    let aborted = 0;
    for (const { uploadId, info } of await this.uploadsOf(bucketId)) {
      await this.discard(uploadId, info, ...(await this.partsOnBackend(uploadId, info)));
      aborted++;
    }
    if (aborted > 0) this.logger.info({ bucketId, aborted }, 'uploads of a deleted bucket aborted');
    return aborted;
  }

  /**
   * Abort the bucket's uploads whose key starts with `prefix` and that were initiated at or before
   * `initiatedNoLaterThan` (a lifecycle rule's AbortIncompleteMultipartUpload); answers how many.
   */
  async abortInitiatedBefore(bucketName: string, prefix: string, initiatedNoLaterThan: Date, resolved?: BucketRef): Promise<number> {
    const target = this.requestBucket(bucketName, resolved);
    const { bucket } = await target();
    let aborted = 0;
    for (const u of await this.uploadsOf(bucket.id)) {
      if (!u.info.key.startsWith(prefix) || new Date(u.info.initiated) > initiatedNoLaterThan) continue;
      try {
        await this.abortIn(target, u.info.key, u.uploadId);
        aborted++;
      } catch (err) {
        // Completed or aborted meanwhile.
        if (!(err instanceof S3Error && err.code === 'NoSuchUpload')) throw err;
      }
    }
    if (aborted > 0) this.logger.info({ bucket: bucket.name, prefix, aborted }, 'expired multipart uploads aborted');
    return aborted;
  }

  /** The bucket's uploads in progress; one completed whose cleanup was left undone is finished here. */
  private async uploadsOf(bucketId: number): Promise<Array<{ uploadId: string; info: UploadInfo }>> {
    const uploads: Array<{ uploadId: string; info: UploadInfo }> = [];
    for (const u of await this.state.uploadsOf(bucketId)) {
      const done = await this.state.completed(u.uploadId);
      if (!done) uploads.push(u);
      else await this.afterCommit(u.uploadId, u.info, ...(await this.partsOnBackend(u.uploadId, u.info)), done.meta);
    }
    return uploads;
  }

  /**
   * An upload's backend as this process knows it without its bucket (which may be gone), and its parts;
   * none when the backend is not known here (its parts are left to the part sweep).
   */
  private async partsOnBackend(uploadId: string, info: UploadInfo): Promise<[StorageBackend | undefined, PartInfo[]]> {
    const backend = this.backends.byBackendKey(info.backendKey);
    return [backend, backend ? await this.state.parts(uploadId) : []];
  }

  /**
   * The state goes first, then the parts' bytes: those given and those recorded when the state went (a
   * part saved while a Complete ran); each best-effort, the part sweep takes what is left.
   */
  private async discard(uploadId: string, info: UploadInfo, backend: StorageBackend | undefined, parts: PartInfo[]): Promise<void> {
    const forgotten = await this.state.forget(uploadId, info);
    if (forgotten.ended) this.metrics.multipartInFlight.dec();
    const locators = new Set([...parts, ...forgotten.parts].map((p) => p.locator));
    for (const locator of locators) {
      await backend?.delete(locator).catch((err) => this.logger.warn({ err, uploadId }, 'could not remove a part'));
    }
  }

  /** ListMultipartUploads of the request's bucket (`resolved`: as the gateway authorised it), one page (upload-listing.ts). */
  async listUploads(bucketName: string, query: UploadListingQuery, resolved?: BucketRef) {
    const { bucket } = await this.objects.bucket(bucketName, resolved);
    return uploadListingPage(await this.uploadsOf(bucket.id), query);
  }
}
