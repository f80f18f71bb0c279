import type { Readable } from 'node:stream';
import type { Logger } from '../../../service-kit/src/index.js';
import {
  assertObjectKey,
  checkCopyChangesObject,
  checkCopySourceConditions,
  checkObjectSize,
  checksumHeaders,
  checkUserMetadata,
  copiedHeaders,
  digesting,
  MAX_OBJECT_SIZE,
  mergeStoredHeaders,
  S3Error,
  startDigest,
  storedChecksum,
  withoutChecksum,
  type ObjectChecksum,
  type StoredHeaders,
  checkWriteConditions,
  ENCRYPTION_ENTRY,
  observed,
} from '../../../object-model/src/index.js';
import { meteredBody } from '../backends/metered-body.js';
import { ThreadMd5 } from '../backends/md5-thread.js';
import { ObjectEncryption, type Sealed } from '../encryption/object-encryption.js';
import type { BackendRegistry } from '../backends/registry.js';
import { BlobMissingError, type ByteRange, type StorageBackend, type StoredBlob } from '../backends/storage-backend.js';
import { BlobGoneError, CommitOutcomeUnknownError, type BucketRef, type Catalog, type ObjectMeta, type StoredObject } from '../catalog/catalog.js';
import type { BlobCollector } from '../gc/blob-collector.js';
import type { DataPlaneMetrics } from '../metrics.js';
import { invalidateObjectRead, readThroughObjectCache, type ReadCacheStore } from '../../../object-model/src/object-read-cache.js';
import type { CopyRequest, PutRequest } from './object-requests.js';

/** Hooks run after a commit: the outbox relay is kicked so that events leave at once. */
export interface CommitListener {
  committed(): void;
}

/** Deciding an unknown commit outcome (ObjectService.resolveLater): first try, backoff cap, tries (~15 min in all). */
const RESOLVE_FIRST_DELAY_MS = 1_000;
const RESOLVE_MAX_DELAY_MS = 60_000;
const RESOLVE_ATTEMPTS = 20;

/** A commit of a write: the catalog's, and whether no account signed the write (never moved to a bucket created again). */
type WriteCommit = Omit<Parameters<Catalog['commitObject']>[0], 'now'> & { anonymous?: boolean };

/** A request's x-strata-bucket must be of the bucket its path names. */
function checkResolvedName(name: string, resolved: BucketRef | undefined): void {
  if (resolved && resolved.name !== name) throw new S3Error('InvalidArgument', `x-strata-bucket names bucket ${resolved.name}, not ${name}.`);
}

/** Single-request object writes, reads and copies. */
export class ObjectService {
  constructor(
    private readonly catalog: Catalog,
    private readonly backends: BackendRegistry,
    private readonly collector: BlobCollector,
    private readonly listener: CommitListener,
    private readonly metrics: DataPlaneMetrics,
    private readonly logger: Logger,
    private readonly clock: () => Date,
    /** Read cache of GET/HEAD metadata (object-model/object-read-cache.ts); none = every read asks the database. */
    private readonly readCache?: ReadCacheStore,
    /** Server-side encryption (its key stores); without keys only SSE-C works. */
    readonly encryption: ObjectEncryption = new ObjectEncryption({}),
  ) {}

  /**
   * The bucket a write goes to: the record the gateway resolved and authorised the request against
   * when it passed one (one resolution per request, no cache of its own here), else the name's current
   * record. The gateway's record has no backend credentials (the control plane never answers them), so
   * a bucket on an object-store backend is read again by that record's id (the same bucket, never another
   * of the name); one on the filesystem backend (one per data plane, no settings) is used as is.
   * Every commit checks the bucket again by id under a share lock, so a bucket deleted meanwhile answers
   * NoSuchBucket (see commitToCurrentBucket).
   */
  async bucket(name: string, resolved?: BucketRef): Promise<{ bucket: BucketRef; backend: StorageBackend }> {
    checkResolvedName(name, resolved);
    const bucket = !resolved ? await this.catalog.bucket(name) : resolved.backend.kind === 'fs' ? resolved : await this.catalog.bucketById(resolved.id, name);
    return { bucket, backend: this.backends.forBucket(bucket.backend) };
  }

  /** Store a body as `key`, or commit it at once from a blob this owner already references (instant upload). */
  async put(req: PutRequest): Promise<{ object: ObjectMeta; instant: boolean }> {
    assertObjectKey(req.key);
    const userMetadata = req.userMetadata ?? {};
    checkUserMetadata(userMetadata);
    checkObjectSize(req.contentLength);
    const { bucket, backend } = await this.bucket(req.bucket, req.resolvedBucket);
    const owner = req.owner ?? bucket.owner;
    const contentType = req.contentType || 'application/octet-stream';
    const base = {
      bucket,
      key: req.key,
      owner,
      anonymous: req.anonymous,
      contentType,
      userMetadata,
      tags: req.tags,
      headers: req.headers,
      conditions: req.conditions,
    };
    const sealed = await this.encryption.seal(req.sse, bucket.encryption);
    if (sealed) return { object: await this.putEncrypted(req, base, sealed, backend), instant: false };

    if (req.instantMd5 !== undefined && req.contentLength !== undefined) {
      const md5 = req.instantMd5;
      const candidate = await this.catalog.instantCandidate(backend.key, md5, req.contentLength, owner);
      // Only onto bytes that are there: a blob whose bytes went missing is repaired by the body instead.
      if (candidate !== undefined && (await backend.exists(candidate.locator))) {
        try {
          const blob = { kind: 'existing' as const, blobId: candidate.id };
          const result = await this.commit({ ...base, blob, etag: md5, md5, size: req.contentLength }, undefined, backend);
          this.metrics.instantUploads.inc({ outcome: 'hit' });
          return { object: result, instant: true };
        } catch (err) {
          if (!(err instanceof BlobGoneError)) throw err;
        }
      }
      this.metrics.instantUploads.inc({ outcome: 'miss' });
    }

    const expectedMd5 = req.contentMd5 ?? req.instantMd5;
    const stored = await backend.put(req.body, { expectedMd5, expectedSize: req.contentLength, maxSize: MAX_OBJECT_SIZE });
    this.metrics.bytesIn.inc(stored.size);
    let headers: StoredHeaders | undefined;
    try {
      headers = mergeStoredHeaders(req.headers, await req.trailingHeaders?.());
    } catch (err) {
      await backend.delete(stored.locator).catch((e) => this.logger.warn({ err: e }, 'could not remove uncommitted blob'));
      throw err;
    }
    const object = await this.commit(
      { ...base, headers, blob: this.newBlob(backend, bucket, stored), etag: stored.md5, md5: stored.md5, size: stored.size },
      stored,
      backend,
    );
    return { object, instant: false };
  }

  /**
   * A PutObject whose bytes are encrypted (encryption/): never an instant upload, and its blob has no
   * MD5, so it is never deduplicated with other bytes (its ciphertext is its data key's alone). Size and
   * Content-MD5 are checked on the plaintext before the last chunk is sealed. ETag as S3: the plaintext's
   * MD5 for SSE-S3; for SSE-C and SSE-KMS an opaque value (ObjectEncryption.opaqueEtag), which S3 documents as
   * not the MD5 of the data.
   */
  private async putEncrypted(req: PutRequest, base: Omit<WriteCommit, 'blob' | 'etag' | 'md5' | 'size'>, sealed: Sealed, backend: StorageBackend) {
    const expectedMd5 = req.contentMd5 ?? req.instantMd5;
    const { stored, plainMd5, size } = await this.storeEncrypted(req.body, sealed, backend, {
      expectedMd5,
      expectedSize: req.contentLength,
      tenant: base.owner,
    });
    let headers: StoredHeaders | undefined;
    try {
      headers = mergeStoredHeaders(mergeStoredHeaders(req.headers, await req.trailingHeaders?.()), { [ENCRYPTION_ENTRY]: JSON.stringify(sealed.record) });
    } catch (err) {
      await backend.delete(stored.locator).catch((e) => this.logger.warn({ err: e }, 'could not remove uncommitted blob'));
      throw err;
    }
    return this.commit({ ...base, headers, ...this.encryptedBlob(backend, base.bucket, stored, sealed, plainMd5), size }, stored, backend);
  }

  /**
   * Plaintext `body` stored encrypted as one segment; size and MD5 checked on the plaintext before its last
   * chunk is sealed. The stored bytes are not hashed: an encrypted blob keeps no MD5.
   */
  async storeEncrypted(
    body: Readable,
    sealed: Sealed,
    backend: StorageBackend,
    opts: { expectedMd5?: string; expectedSize?: number; part?: boolean; tenant?: string },
  ) {
    // The plaintext is counted here and hashed on the MD5 thread (its MD5 is the ETag and the Content-MD5 check).
    const metered = meteredBody(body, { ...opts, maxSize: MAX_OBJECT_SIZE }, false);
    const md5 = new ThreadMd5();
    let plainMd5 = '';
    const check = async () => {
      plainMd5 = await md5.digestHex();
      metered.verify(metered.counter.size, plainMd5);
    };
    const plainSize = opts.expectedSize;
    const encrypted = ObjectEncryption.encrypting(metered.source.pipe(metered.counter), sealed.dataKey, check, { plainSize, md5, tenant: opts.tenant });
    metered.source.on('error', (err) => encrypted.destroy(err));
    encrypted.on('error', () => md5.drop());
    const stored = await backend.put(encrypted, {
      expectedSize: opts.expectedSize === undefined ? undefined : ObjectEncryption.storedSize(opts.expectedSize),
      maxSize: ObjectEncryption.storedSize(MAX_OBJECT_SIZE),
      unhashed: true,
      ...(opts.part ? { part: true } : {}),
    });
    this.metrics.bytesIn.inc(stored.size);
    return { stored, plainMd5, size: metered.counter.size };
  }

  /**
   * The blob, ETag and MD5 of encrypted bytes just stored. The blob has no MD5, so it is never found by
   * instant upload nor deduplicated (its ciphertext is its data key's alone). ETag as S3: the plaintext's
   * MD5 for SSE-S3; for SSE-C and SSE-KMS an opaque value (ObjectEncryption.opaqueEtag), which S3
   * documents as not the MD5 of the data.
   */
  private encryptedBlob(backend: StorageBackend, bucket: BucketRef, stored: StoredBlob, sealed: Sealed, plainMd5: string) {
    const sse3 = sealed.record.alg === 'AES256';
    return {
      blob: { ...this.newBlob(backend, bucket, stored), md5: null },
      etag: sse3 ? plainMd5 : ObjectEncryption.opaqueEtag(sealed.dataKey, plainMd5),
      md5: sse3 ? plainMd5 : null,
    };
  }

  newBlob(backend: StorageBackend, bucket: BucketRef, stored: StoredBlob) {
    return {
      kind: 'new' as const,
      backendKey: backend.key,
      backend: bucket.backend,
      locator: stored.locator,
      md5: stored.md5,
      size: stored.size,
      data: stored.inline,
    };
  }

  /**
   * Commit metadata for bytes already stored; the bytes just written are deleted when the commit failed
   * or when the same content was already stored (dedupe), and blobs left unreferenced are freed. Bytes
   * are never deleted while the commit's outcome is unknown (CommitOutcomeUnknownError): they stay until
   * it is decided (resolveLater), or, should this process end first, for the orphan sweep.
   */
  async commit(req: WriteCommit, written: StoredBlob | undefined, backend: StorageBackend): Promise<ObjectMeta> {
    let result;
    try {
      result = await this.commitToCurrentBucket(req, backend);
    } catch (err) {
      // A commit whose outcome is unknown (lost connection at COMMIT) may still have replaced the object.
      if (this.readCache) await invalidateObjectRead(this.readCache, req.bucket.name, req.key).catch(() => undefined);
      if (written && err instanceof CommitOutcomeUnknownError) this.resolveLater(err.eventId, written.locator, backend);
      else if (written) await backend.delete(written.locator).catch((e) => this.logger.warn({ err: e }, 'could not remove uncommitted blob'));
      throw err;
    }
    // Before answering: no reader may be served the replaced version from the cache any more.
    if (this.readCache) {
      await invalidateObjectRead(this.readCache, req.bucket.name, req.key).catch((err) => this.logger.warn({ err }, 'object read cache not invalidated'));
    }
    // The object is committed: nothing after this may fail the request (bytes left go with the orphan sweep).
    if (written && result.sharedBlob) {
      await this.dropDuplicate(written, result.sharedBlob, backend).catch((err) => this.logger.warn({ err }, 'duplicate bytes left to the orphan sweep'));
    } else if (written && !result.newBlobKept) {
      await backend.delete(written.locator).catch((err) => this.logger.warn({ err }, 'duplicate bytes left to the orphan sweep'));
    }
    this.listener.committed();
    if (result.unreferencedBlobIds.length) {
      await this.collector.collect(result.unreferencedBlobIds).catch((err) => this.logger.warn({ err }, 'freeing replaced blob failed; the sweep will retry'));
    }
    return result.meta;
  }

  /**
   * The bytes just written duplicate a stored blob's: they go, once that blob's bytes are known to be
   * there. A blob whose bytes are missing (lost before this rule held, or by hand) takes these instead,
   * which repairs every object that points at it.
   */
  private async dropDuplicate(written: StoredBlob, shared: { id: number; locator: string }, backend: StorageBackend): Promise<void> {
    if (await backend.exists(shared.locator)) {
      await backend.delete(written.locator);
      return;
    }
    const repaired = await this.catalog.repairBlob(shared.id, shared.locator, { locator: written.locator, data: written.inline });
    // Not repaired: the blob changed meanwhile (freed once its last object was replaced, or repaired by
    // another writer), and no row names these bytes, so they go. (A repair whose outcome is unknown
    // throws instead, and leaves them to the orphan sweep.)
    if (!repaired) {
      await backend.delete(written.locator);
      return;
    }
    this.logger.warn({ blobId: shared.id, missing: shared.locator, locator: written.locator }, 'blob whose bytes were missing repaired with the same content');
    if (this.readCache) {
      for (const { bucket, key } of repaired) await invalidateObjectRead(this.readCache, bucket, key).catch(() => undefined);
    }
  }

  /**
   * Decide an unknown commit outcome in the background (ObjectCommit.outcome) and delete the bytes it
   * wrote if it did not commit; retried with backoff while the database cannot answer. A process that
   * ends first leaves the bytes to the orphan sweep, whose grace outlasts any commit in flight.
   */
  private resolveLater(eventId: string, locator: string, backend: StorageBackend, attempt = 0): void {
    const timer = setTimeout(
      () => {
        this.catalog
          .commitOutcome(eventId)
          .then(
            async (outcome) => {
              if (outcome === 'not-committed') await backend.delete(locator);
              this.logger.info({ eventId, locator, outcome }, 'unknown commit outcome decided');
            },
            (err: unknown) => {
              if (attempt < RESOLVE_ATTEMPTS) this.resolveLater(eventId, locator, backend, attempt + 1);
              else this.logger.warn({ err, eventId, locator }, 'commit outcome still unknown; its bytes are left to the orphan sweep');
            },
          )
          .catch((err: unknown) => this.logger.warn({ err, eventId, locator }, 'bytes of a commit that did not take place not removed'));
      },
      Math.min(RESOLVE_FIRST_DELAY_MS * 2 ** attempt, RESOLVE_MAX_DELAY_MS),
    );
    timer.unref();
  }

  /**
   * The record a write was resolved against (the gateway's, up to its cache's age) may be of a bucket
   * deleted since: its commit answers NoSuchBucket. When the name has meanwhile been created again on the
   * same backend by the same owner, and that owner is the writer (`rb` then `mb`; a writer whom only the old
   * bucket's ACL admitted is not admitted to the new one), the write belongs to the new bucket. An anonymous
   * write is never moved: its owner is the old bucket's owner, but only the old bucket's ACL admitted it.
   */
  private async commitToCurrentBucket({ anonymous, ...req }: WriteCommit, backend: StorageBackend) {
    try {
      return await this.catalog.commitObject({ ...req, now: this.clock() });
    } catch (err) {
      if (!(err instanceof S3Error && err.code === 'NoSuchBucket') || anonymous) throw err;
      const current = await this.catalog.bucket(req.bucket.name).catch(() => undefined);
      if (
        !current ||
        current.id === req.bucket.id ||
        current.owner !== req.bucket.owner ||
        current.owner !== req.owner ||
        this.backends.forBucket(current.backend).key !== backend.key
      )
        throw err;
      const blob = req.blob.kind === 'new' ? { ...req.blob, backend: current.backend } : req.blob;
      return this.catalog.commitObject({ ...req, bucket: current, blob, now: this.clock() });
    }
  }

  /**
   * The object `key` of bucket `bucketName`. With `resolved` (the record the gateway authorised the read
   * against, x-strata-bucket) only that bucket's object is answered: when the name now belongs to another
   * bucket (deleted and created again since the gateway resolved it) the answer is NoSuchBucket, never
   * the other bucket's object. The check compares the row id read with the object, no further lookup.
   */
  async head(bucketName: string, key: string, resolved?: BucketRef): Promise<{ object: StoredObject; backend: StorageBackend }> {
    assertObjectKey(key);
    checkResolvedName(bucketName, resolved);
    const load = () => this.catalog.objectByBucketName(bucketName, key, resolved?.id);
    // Only found objects of buckets whose backend config is just `{kind}` are cached (no settings or
    // secrets of per-bucket backends in the cache).
    const { bucket, object } = this.readCache
      ? await readThroughObjectCache(this.readCache, bucketName, key, load, (v) => v.object !== undefined && Object.keys(v.bucket.backend).length === 1)
      : await load();
    if (resolved && bucket.id !== resolved.id) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucketName });
    if (!object) throw new S3Error('NoSuchKey', undefined, { Key: key });
    const backend = this.backends.byBackendKey(object.backendKey) ?? this.backends.forBucket(bucket.backend);
    return { object, backend };
  }

  /**
   * The object's bytes (a range of them), decrypted when it is encrypted: `dataKey` is what
   * encryption.open answered for it (undefined for an object stored in the clear).
   */
  async read(object: StoredObject, backend: StorageBackend, range?: ByteRange, dataKey?: Buffer): Promise<Readable> {
    const opened =
      dataKey && object.encryption
        ? ObjectEncryption.decrypting(backend, object.locator, object.partSizes ?? [object.size], dataKey, range, object.owner)
        : backend.get(object.locator, range);
    const stream = await opened.catch((err: unknown) => {
      if (!(err instanceof BlobMissingError)) throw err;
      this.metrics.missingBlobReads.inc();
      this.logger.error(
        { bucket: object.bucket, key: object.key, blobId: object.blobId, backend: err.backendKey, locator: err.locator },
        "object's bytes are missing on its storage backend (data loss): answered 503 until they are restored or uploaded again",
      );
      throw err.toS3Error();
    });
    // Bytes already whole in memory (a small blob, read at once) are counted as they are; others as the
    // reader takes them, without making the stream flow before it reads (a 'data' listener would).
    const length = range ? range.end - range.start + 1 : object.size;
    if (stream.readableLength === length) {
      this.metrics.bytesOut.inc(length);
      return stream;
    }
    return observed(stream, (chunk) => this.metrics.bytesOut.inc(chunk.length));
  }

  /** CopyObject: on the same backend the new object shares the source's blob (no bytes are copied). */
  async copy(req: CopyRequest): Promise<ObjectMeta> {
    assertObjectKey(req.key);
    const { bucket, backend } = await this.bucket(req.bucket, req.resolvedBucket);
    const owner = req.owner ?? bucket.owner;
    for (let attempt = 0; ; attempt++) {
      const { object: source, backend: sourceBackend } = await this.head(req.sourceBucket, req.sourceKey, req.resolvedSourceBucket);
      checkCopySourceConditions(req.conditions, source);
      // Checked again by the commit; failing here spares reading or writing the bytes of a doomed copy.
      if (req.destinationConditions) checkWriteConditions(req.destinationConditions, (await this.catalog.object(bucket, req.key))?.etag, req.key);
      checkCopyChangesObject(req);
      // The copy's encryption is its request's or the bucket default's, never the source's (as S3).
      const sourceKey = await this.encryption.open(source.encryption, req.sse?.copySourceCustomerKey);
      const { copySourceCustomerKey: _sourceKey, ...targetSse } = req.sse ?? {};
      const sealed = await this.encryption.seal(targetSse, bucket.encryption);
      const sameBytes = ObjectEncryption.sameKey(source.encryption, sealed, sourceKey, targetSse.customerKey);
      const replace = req.metadataDirective === 'REPLACE';
      const contentType = replace ? req.contentType || 'application/octet-stream' : source.contentType;
      const userMetadata = replace ? (req.userMetadata ?? {}) : source.userMetadata;
      checkUserMetadata(userMetadata);
      const tags = req.taggingDirective === 'REPLACE' ? req.tags : source.tags;
      const kept = storedChecksum(source.headers);
      // A checksum of another algorithm (or a COMPOSITE one) is computed from the bytes as they are read.
      const digest =
        req.checksumAlgorithm && !(kept?.algorithm === req.checksumAlgorithm && kept.type === 'FULL_OBJECT') ? startDigest(req.checksumAlgorithm) : undefined;
      const headersWith = (checksum: ObjectChecksum | undefined) =>
        mergeStoredHeaders(withoutChecksum(replace ? req.headers : copiedHeaders(source.headers, req.headers)), checksum && checksumHeaders(checksum));
      const computed = async (): Promise<ObjectChecksum | undefined> =>
        digest ? { algorithm: req.checksumAlgorithm!, value: Buffer.from(await digest.digest()).toString('base64'), type: 'FULL_OBJECT' } : kept;
      // A copy keeps the source's ETag, so a multipart source's `-N` copy keeps its N parts too (and
      // their checksums, unless the copy's checksum is of another algorithm now).
      const partChecksums = digest ? undefined : source.partChecksums;
      const base = {
        bucket,
        key: req.key,
        owner,
        anonymous: req.anonymous,
        contentType,
        userMetadata,
        tags,
        etag: source.etag,
        md5: source.md5,
        size: source.size,
        partSizes: source.partSizes,
        partChecksums,
        conditions: req.destinationConditions,
      };
      // The same key (or none on both sides): the copy keeps the source's bytes and record.
      const record = sameBytes && source.encryption ? { [ENCRYPTION_ENTRY]: source.encryption } : undefined;
      if (!sameBytes || (source.encryption && sourceBackend.key !== backend.key && digest)) {
        const plain = await this.read(source, sourceBackend, undefined, sourceKey);
        const bytes = digest ? digesting(plain, digest) : plain;
        if (!sealed) {
          const stored = await backend.put(bytes, { expectedSize: source.size });
          this.metrics.bytesIn.inc(stored.size);
          const fresh = {
            ...base,
            partSizes: source.encryption ? undefined : base.partSizes,
            etag: source.encryption ? stored.md5 : base.etag,
            md5: stored.md5,
          };
          return this.commit({ ...fresh, headers: headersWith(await computed()), blob: this.newBlob(backend, bucket, stored) }, stored, backend);
        }
        // Encrypted anew as one segment: a new object of one part (its ETag is the new bytes', as S3 gives a re-encrypted copy).
        const { stored, plainMd5 } = await this.storeEncrypted(bytes, sealed, backend, { expectedSize: source.size, tenant: base.owner });
        const headers = mergeStoredHeaders(headersWith(await computed()), { [ENCRYPTION_ENTRY]: JSON.stringify(sealed.record) });
        const encrypted = this.encryptedBlob(backend, bucket, stored, sealed, plainMd5);
        return this.commit({ ...base, ...encrypted, partSizes: undefined, partChecksums: undefined, headers }, stored, backend);
      }
      if (sourceBackend.key === backend.key) {
        // The blob is shared; the bytes are read only when a new checksum needs them.
        if (digest) for await (const chunk of await this.read(source, sourceBackend, undefined, sourceKey)) digest.update(chunk as Buffer);
        try {
          const headers = mergeStoredHeaders(headersWith(await computed()), record);
          return await this.commit({ ...base, headers, blob: { kind: 'existing', blobId: source.blobId } }, undefined, backend);
        } catch (err) {
          // The source was replaced and its blob freed meanwhile: read the source again.
          if (err instanceof BlobGoneError && attempt < 3) continue;
          throw err;
        }
      }
      // Another backend: the stored bytes travel as they are (encrypted ones with their record; their blob has no MD5).
      const bytes = await sourceBackend.get(source.locator);
      const stored = await backend.put(digest ? digesting(bytes, digest) : bytes, source.encryption ? {} : { expectedSize: source.size });
      this.metrics.bytesIn.inc(stored.size);
      const blob = { ...this.newBlob(backend, bucket, stored), ...(source.encryption ? { md5: null } : {}) };
      return this.commit({ ...base, headers: mergeStoredHeaders(headersWith(await computed()), record), blob }, stored, backend);
    }
  }
}
