import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { parseRange } from '../../images/data-plane/src/http/routes.js';
import {
  checkCopyChangesObject,
  checkCopySourceConditions,
  checkDeleteConditions,
  checkObjectSize,
  checkPartNumber,
  checkPartOrder,
  checkWriteConditions,
  notModified,
  S3Error,
  type BackendRef,
  type BucketConfigs,
  type BucketInfo,
  type NewBucketAccess,
  type CompletedPart,
  type CopyObjectInput,
  type DeleteConditions,
  type DeleteObjectsResult,
  type GetObjectInput,
  type ListBucketsQuery,
  type ListObjectsQuery,
  type ListObjectsResult,
  type ObjectLayer,
  type ObjectMeta,
  type ObjectRead,
  type PutObjectInput,
  type WriteConditions,
} from '../../images/object-model/src/index.js';

/** One call the gateway made, with its arguments (bodies read to bytes). */
export interface LayerCall {
  op: string;
  args: unknown[];
}

interface Upload {
  bucket: string;
  key: string;
  owner: string;
  contentType?: string;
  parts: Map<number, Buffer>;
}

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
/** S3's smallest part but the last. */
const MIN_PART_SIZE = 5 * 1024 * 1024;

async function bytesOf(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/**
 * An object layer in memory, for driving the gateway's handlers without the data and control planes:
 * it keeps S3's rules by the object model's own functions (conditions, copy rules), records every
 * call, and counts the bodies it opens (a read answered 304 / 412 must open none). It keeps the
 * contract the real layer keeps for every call it has (test/object-model/object-layer-contract.ts runs
 * one suite over both).
 */
export class FakeObjectLayer implements Partial<ObjectLayer> {
  readonly calls: LayerCall[] = [];
  bodiesOpened = 0;
  readonly buckets = new Map<string, BucketInfo>();
  readonly objects = new Map<string, { meta: ObjectMeta; bytes: Buffer }>();
  readonly uploads = new Map<string, Upload>();
  private clock = Date.parse('2026-01-02T03:04:05Z');

  addBucket(name: string, owner: string): void {
    // As the control plane makes them: ACLs off (BucketOwnerEnforced).
    this.buckets.set(name, {
      name,
      owner,
      createdAt: new Date(this.clock).toISOString(),
      backend: { kind: 'fs' },
      ownership: [{ objectOwnership: 'BucketOwnerEnforced' }],
    });
  }

  /** An object stored as if written earlier (not recorded as a call). */
  store(bucket: string, key: string, bytes: Buffer, extra: Partial<ObjectMeta> = {}): ObjectMeta {
    const meta: ObjectMeta = {
      bucket,
      key,
      size: bytes.length,
      etag: md5(bytes),
      md5: null,
      contentType: 'application/octet-stream',
      userMetadata: {},
      lastModified: new Date(this.clock).toISOString(),
      ...extra,
    };
    this.objects.set(`${bucket}/${key}`, { meta, bytes });
    return meta;
  }

  /** The calls of one operation. */
  callsOf(op: string): unknown[][] {
    return this.calls.filter((c) => c.op === op).map((c) => c.args);
  }

  private record(op: string, ...args: unknown[]): void {
    this.calls.push({ op, args });
  }

  private find(bucket: string, key: string): { meta: ObjectMeta; bytes: Buffer } {
    const o = this.objects.get(`${bucket}/${key}`);
    if (!o) throw new S3Error('NoSuchKey', undefined, { Key: key });
    return o;
  }

  private checkWrite(bucket: string, key: string, c: WriteConditions | undefined): void {
    checkWriteConditions(c, this.objects.get(`${bucket}/${key}`)?.meta.etag, key);
  }

  async getBucket(bucket: string): Promise<BucketInfo> {
    const b = this.buckets.get(bucket);
    if (!b) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket });
    return b;
  }

  async listBuckets(owner: string, q: ListBucketsQuery = {}): Promise<BucketInfo[]> {
    this.record('listBuckets', owner, q);
    const { prefix = '', after, limit, names } = q;
    return [...this.buckets.values()]
      .filter((b) => b.owner === owner && b.name.startsWith(prefix) && (after === undefined || b.name > after) && (!names || names.includes(b.name)))
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .slice(0, limit);
  }

  async createBucket(bucket: string, owner: string, backend?: BackendRef, access: NewBucketAccess = {}): Promise<BucketInfo> {
    this.record('createBucket', bucket, owner, backend, access);
    if (this.buckets.has(bucket))
      throw new S3Error(this.buckets.get(bucket)!.owner === owner ? 'BucketAlreadyOwnedByYou' : 'BucketAlreadyExists', undefined, { BucketName: bucket });
    this.addBucket(bucket, owner);
    const created = this.buckets.get(bucket)!;
    if (access.ownership) created.ownership = access.ownership;
    if (access.acl) created.acl = access.acl;
    return created;
  }

  /** The configurations a bucket record carries (tags are kept elsewhere, and not faked). */
  async putBucketConfig<K extends keyof BucketConfigs>(bucket: string, kind: K, rules: BucketConfigs[K] | undefined): Promise<void> {
    this.record('putBucketConfig', bucket, kind, rules);
    const b = this.buckets.get(bucket);
    if (!b) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket });
    if (kind === 'tags') throw new Error('the fake object layer keeps no bucket tags');
    Object.assign(b, { [kind]: rules });
  }

  async deleteObjects(bucket: string, objects: Array<{ key: string } & DeleteConditions>): Promise<DeleteObjectsResult> {
    this.record('deleteObjects', bucket, objects);
    const result: DeleteObjectsResult = { deleted: [], errors: [] };
    for (const { key, ...conditions } of objects) {
      try {
        this.remove(bucket, key, conditions);
        result.deleted.push(key);
      } catch (err) {
        if (!(err instanceof S3Error)) throw err;
        result.errors.push({ key, code: err.code, message: err.message });
      }
    }
    return result;
  }

  /** Delete under conditions (none: a missing key deletes without error, as S3). */
  private remove(bucket: string, key: string, conditions: DeleteConditions | undefined): void {
    if (conditions && Object.keys(conditions).length) checkDeleteConditions(conditions, this.objects.get(`${bucket}/${key}`)?.meta, key);
    this.objects.delete(`${bucket}/${key}`);
  }

  async putObject(bucket: string, key: string, input: PutObjectInput, body: Readable): Promise<{ object: ObjectMeta; instant: boolean }> {
    checkObjectSize(input.contentLength);
    const bytes = await bytesOf(body);
    this.record('putObject', bucket, key, { ...input, trailingHeaders: undefined }, bytes);
    this.checkWrite(bucket, key, input);
    if (input.contentMd5 !== undefined && input.contentMd5 !== createHash('md5').update(bytes).digest('base64')) throw new S3Error('BadDigest');
    const object = this.store(bucket, key, bytes, {
      contentType: input.contentType ?? 'application/octet-stream',
      userMetadata: input.userMetadata,
      ...(input.tags?.length ? { tags: input.tags } : {}),
    });
    return { object, instant: false };
  }

  async getObject(bucket: string, key: string, input: GetObjectInput): Promise<ObjectRead> {
    this.record('getObject', bucket, key, input);
    if (input.partNumber !== undefined) checkPartNumber(input.partNumber);
    const { meta, bytes } = this.find(bucket, key);
    if (notModified(meta, input.conditions)) return { status: 304, object: meta, contentLength: 0 };
    const range = parseRange(input.range, bytes.length);
    const slice = range ? bytes.subarray(range.start, range.end + 1) : bytes;
    const read: ObjectRead = {
      status: range ? 206 : 200,
      object: meta,
      contentLength: slice.length,
      ...(range ? { contentRange: `bytes ${range.start}-${range.end}/${bytes.length}` } : {}),
    };
    if (input.method === 'HEAD') return read;
    this.bodiesOpened++;
    return { ...read, body: Readable.from([slice]) };
  }

  async headObject(bucket: string, key: string): Promise<ObjectMeta> {
    this.record('headObject', bucket, key);
    return this.find(bucket, key).meta;
  }

  async deleteObject(bucket: string, key: string, conditions?: DeleteConditions): Promise<void> {
    this.record('deleteObject', bucket, key, conditions);
    this.remove(bucket, key, conditions);
  }

  /**
   * Keys in byte order after the marker (start-after, a v1 marker, or this fake's continuation token:
   * the last key or common prefix a page answered), grouped under the delimiter; max-keys counts both.
   */
  async listObjects(bucket: string, query: ListObjectsQuery): Promise<ListObjectsResult> {
    this.record('listObjects', bucket, query);
    const prefix = query.prefix ?? '';
    const after = [query.startAfter, query.marker, query.continuationToken].reduce<string>((a, m) => (m !== undefined && m > a ? m : a), '');
    const sorted = [...this.objects.values()]
      .map((o) => o.meta)
      .filter((m) => m.bucket === bucket && m.key.startsWith(prefix) && m.key > after)
      .sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
    const objects: ObjectMeta[] = [];
    const commonPrefixes: string[] = [];
    const maxKeys = query.maxKeys ?? 1000;
    let last: string | undefined;
    for (const meta of sorted) {
      const cut = query.delimiter ? meta.key.indexOf(query.delimiter, prefix.length) : -1;
      const common = cut >= 0 ? meta.key.slice(0, cut + query.delimiter!.length) : undefined;
      // A common prefix this page listed, or the last page ended on, is passed whole.
      if (common !== undefined && (common === last || common === after)) continue;
      if (objects.length + commonPrefixes.length >= maxKeys) {
        return { objects, commonPrefixes, isTruncated: true, nextContinuationToken: last!, nextMarker: last! };
      }
      if (common !== undefined) commonPrefixes.push(common);
      else objects.push(meta);
      last = common ?? meta.key;
    }
    return { objects, commonPrefixes, isTruncated: false };
  }

  async copyObject(bucket: string, key: string, input: CopyObjectInput): Promise<ObjectMeta> {
    this.record('copyObject', bucket, key, input);
    checkCopyChangesObject({ bucket, key, ...input });
    const source = this.find(input.sourceBucket, input.sourceKey);
    checkCopySourceConditions(input.conditions, source.meta);
    this.checkWrite(bucket, key, input.destinationConditions);
    const replace = input.metadataDirective === 'REPLACE';
    return this.store(bucket, key, source.bytes, {
      contentType: replace ? (input.contentType ?? 'application/octet-stream') : source.meta.contentType,
      userMetadata: replace ? (input.userMetadata ?? {}) : source.meta.userMetadata,
    });
  }

  async createMultipart(bucket: string, key: string, input: { owner: string; contentType?: string }): Promise<{ uploadId: string }> {
    this.record('createMultipart', bucket, key, input);
    const uploadId = `upload-${this.uploads.size + 1}`;
    this.uploads.set(uploadId, { bucket, key, owner: input.owner, contentType: input.contentType, parts: new Map() });
    return { uploadId };
  }

  private upload(uploadId: string): Upload {
    const u = this.uploads.get(uploadId);
    if (!u) throw new S3Error('NoSuchUpload', undefined, { UploadId: uploadId });
    return u;
  }

  async uploadPart(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    input: { contentLength?: number },
    body: Readable,
  ): Promise<{ etag: string }> {
    checkObjectSize(input.contentLength);
    const bytes = await bytesOf(body);
    this.record('uploadPart', bucket, key, uploadId, partNumber, bytes);
    checkPartNumber(partNumber);
    this.upload(uploadId).parts.set(partNumber, bytes);
    return { etag: md5(bytes) };
  }

  async completeMultipart(bucket: string, key: string, uploadId: string, parts: CompletedPart[], conditions?: WriteConditions): Promise<ObjectMeta> {
    this.record('completeMultipart', bucket, key, uploadId, parts, conditions);
    checkPartOrder(parts, uploadId);
    const u = this.upload(uploadId);
    // S3's rules, in the real layer's order: ascending part numbers (checkPartOrder), known ETags, every part but the last at least 5 MiB.
    parts.forEach((p) => {
      const stored = u.parts.get(p.partNumber);
      if (!stored || md5(stored) !== p.etag.replace(/^"|"$/g, '').toLowerCase()) throw new S3Error('InvalidPart');
    });
    const chosen = parts.map((p) => u.parts.get(p.partNumber)!);
    if (chosen.slice(0, -1).some((b) => b.length < MIN_PART_SIZE)) throw new S3Error('EntityTooSmall');
    this.checkWrite(bucket, key, conditions);
    this.uploads.delete(uploadId);
    // S3's multipart ETag: the MD5 of the parts' binary MD5s, then -N.
    const etag = `${md5(Buffer.concat(chosen.map((b) => Buffer.from(md5(b), 'hex'))))}-${parts.length}`;
    return this.store(bucket, key, Buffer.concat(chosen), { etag, contentType: u.contentType ?? 'application/octet-stream' });
  }

  async abortMultipart(bucket: string, key: string, uploadId: string): Promise<void> {
    this.record('abortMultipart', bucket, key, uploadId);
    this.upload(uploadId);
    this.uploads.delete(uploadId);
  }
}
