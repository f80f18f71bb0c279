import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  checkCopyChangesObject,
  checkCopySourceConditions,
  checkObjectSize,
  checkPartNumber,
  checkPartOrder,
  checkWriteConditions,
  etagMatches,
  notModified,
  S3Error,
  type BackendRef,
  type BucketInfo,
  type CompletedPart,
  type CopyObjectInput,
  type DeleteObjectsResult,
  type GetObjectInput,
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

async function bytesOf(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/**
 * An object layer in memory, for driving the gateway's handlers without the data and control planes:
 * it keeps S3's rules by the object model's own functions (conditions, copy rules), records every
 * call, and counts the bodies it opens (a read answered 304 / 412 must open none).
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

  async listBuckets(owner: string): Promise<BucketInfo[]> {
    this.record('listBuckets', owner);
    return [...this.buckets.values()].filter((b) => b.owner === owner).sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  async createBucket(bucket: string, owner: string, backend?: BackendRef): Promise<BucketInfo> {
    this.record('createBucket', bucket, owner, backend);
    if (this.buckets.has(bucket))
      throw new S3Error(this.buckets.get(bucket)!.owner === owner ? 'BucketAlreadyOwnedByYou' : 'BucketAlreadyExists', undefined, { BucketName: bucket });
    this.addBucket(bucket, owner);
    return this.buckets.get(bucket)!;
  }

  async deleteObjects(bucket: string, objects: Array<{ key: string; ifMatch?: string }>): Promise<DeleteObjectsResult> {
    this.record('deleteObjects', bucket, objects);
    const result: DeleteObjectsResult = { deleted: [], errors: [] };
    for (const o of objects) {
      const current = this.objects.get(`${bucket}/${o.key}`);
      if (o.ifMatch !== undefined && (!current || !etagMatches(o.ifMatch, current.meta.etag))) {
        result.errors.push({ key: o.key, code: 'PreconditionFailed', message: 'At least one of the pre-conditions you specified did not hold' });
        continue;
      }
      this.objects.delete(`${bucket}/${o.key}`);
      result.deleted.push(o.key);
    }
    return result;
  }

  async putObject(bucket: string, key: string, input: PutObjectInput, body: Readable): Promise<{ object: ObjectMeta; instant: boolean }> {
    checkObjectSize(input.contentLength);
    const bytes = await bytesOf(body);
    this.record('putObject', bucket, key, { ...input, trailingHeaders: undefined }, bytes);
    this.checkWrite(bucket, key, input);
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
    const m = input.range ? /^bytes=(\d+)-(\d+)$/.exec(input.range) : null;
    const slice = m ? bytes.subarray(Number(m[1]), Number(m[2]) + 1) : bytes;
    const read: ObjectRead = {
      status: m ? 206 : 200,
      object: meta,
      contentLength: slice.length,
      ...(m ? { contentRange: `bytes ${m[1]}-${m[2]}/${bytes.length}` } : {}),
    };
    if (input.method === 'HEAD') return read;
    this.bodiesOpened++;
    return { ...read, body: Readable.from([slice]) };
  }

  async headObject(bucket: string, key: string): Promise<ObjectMeta> {
    this.record('headObject', bucket, key);
    return this.find(bucket, key).meta;
  }

  async deleteObject(bucket: string, key: string, conditions?: unknown): Promise<void> {
    this.record('deleteObject', bucket, key, conditions);
    this.objects.delete(`${bucket}/${key}`);
  }

  async listObjects(bucket: string, query: ListObjectsQuery): Promise<ListObjectsResult> {
    this.record('listObjects', bucket, query);
    const keys = [...this.objects.values()].filter(
      (o) => o.meta.bucket === bucket && o.meta.key.startsWith(query.prefix ?? '') && o.meta.key > (query.startAfter ?? ''),
    );
    const sorted = keys.map((o) => o.meta).sort((a, b) => (a.key < b.key ? -1 : 1));
    const page = sorted.slice(0, query.maxKeys ?? 1000);
    return {
      objects: page,
      commonPrefixes: [],
      isTruncated: page.length < sorted.length,
      ...(page.length < sorted.length ? { nextContinuationToken: page.at(-1)!.key } : {}),
    };
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
    for (const p of parts) if (md5(u.parts.get(p.partNumber) ?? Buffer.alloc(0)) !== p.etag) throw new S3Error('InvalidPart');
    this.checkWrite(bucket, key, conditions);
    this.uploads.delete(uploadId);
    const bytes = Buffer.concat(parts.map((p) => u.parts.get(p.partNumber)!));
    return this.store(bucket, key, bytes, { etag: `${md5(bytes)}-${parts.length}`, contentType: u.contentType ?? 'application/octet-stream' });
  }

  async abortMultipart(bucket: string, key: string, uploadId: string): Promise<void> {
    this.record('abortMultipart', bucket, key, uploadId);
    this.upload(uploadId);
    this.uploads.delete(uploadId);
  }
}
