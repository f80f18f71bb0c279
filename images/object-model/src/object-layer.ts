import type { Readable } from 'node:stream';
import type { AccessControlList, Grant, OwnershipRule, PublicAccessBlock } from './access-control.js';
import type { BucketConfigs, EncryptionRule } from './bucket-configs.js';
import type { LoggingRule } from './bucket-logging.js';
import type { CorsRule } from './bucket-cors.js';
import type { LifecycleRule } from './bucket-lifecycle.js';
import type { ObjectConditions } from './preconditions.js';
import type { SseAnswer, SseRequest } from './object-encryption.js';
import type { StoredHeaders } from './stored-headers.js';
import type { Tag } from './tags.js';

/**
 * The one contract between the gateway's S3 handlers and the object layer behind them (the data plane
 * for bytes and multipart, the control plane for metadata): every S3 bucket, object and multipart
 * operation is one method. A handler parses and authorises the request, makes one call and renders
 * the answer; the rules of S3 (keys, metadata, copy rules, preconditions) are kept by the layer.
 */

/** An object's metadata as the object layer answers it. */
export interface ObjectMeta {
  bucket: string;
  key: string;
  size: number;
  etag: string;
  md5: string | null;
  contentType: string;
  userMetadata: Record<string, string>;
  lastModified: string;
  /** Its tags; absent when it has none. */
  tags?: Tag[];
  /** Its stored headers (Cache-Control, ..., its checksum); absent when it has none. */
  headers?: StoredHeaders;
  /** Its server-side encryption; absent for an object stored in the clear. */
  sse?: SseAnswer;
}

export interface BackendRef {
  kind: string;
  [setting: string]: unknown;
}

export interface BucketInfo {
  /** Its row id: a bucket deleted and created again under the same name is another bucket. */
  id?: number;
  name: string;
  owner: string;
  createdAt: string;
  backend: BackendRef;
  /** The bucket's lifecycle rules, when it has any (the answers' x-amz-expiration). */
  lifecycle?: LifecycleRule[];
  /** The bucket's CORS rules, when it has any (browsers are answered by them instead of the server-wide policy). */
  cors?: CorsRule[];
  /** Its object ownership controls (access-control.ts); absent: none (ObjectWriter, as S3 without controls). */
  ownership?: OwnershipRule[];
  /** Its grants, when it has any besides its owner's. */
  acl?: Grant[];
  /** Its public access block, when it has one. */
  publicAccessBlock?: PublicAccessBlock[];
  /** Its default encryption, when it has one. */
  encryption?: EncryptionRule[];
  /** Its server access logging, when it is on (the gateway records its requests). */
  logging?: LoggingRule[];
}

export interface BucketListing {
  name: string;
  createdAt: string;
  backend: BackendRef;
}

/** One page of an owner's buckets, by name in byte order (S3's ListBuckets paging, keyset on the name). */
export interface ListBucketsQuery {
  /** Only names that start with it. */
  prefix?: string;
  /** Only names after it (the last name of the page before). */
  after?: string;
  /** At most this many (every match when absent). */
  limit?: number;
  /** Only these names (a scoped key's buckets). */
  names?: string[];
}

export interface ListObjectsQuery {
  prefix?: string;
  delimiter?: string;
  maxKeys?: number;
  startAfter?: string;
  continuationToken?: string;
  marker?: string;
}

export interface ListObjectsResult {
  objects: ObjectMeta[];
  commonPrefixes: string[];
  isTruncated: boolean;
  nextContinuationToken?: string;
  nextMarker?: string;
}

/** What a conditional delete requires of the object (checked under the key's lock). */
export interface DeleteConditions {
  /** An If-Match list (`*`: any object). */
  ifMatch?: string;
  /** ISO 8601; compared to the second. */
  lastModifiedTime?: string;
  size?: number;
}

export interface DeleteObjectsResult {
  deleted: string[];
  errors: Array<{ key: string; code: string; message: string }>;
}

/** What a write requires of the object it replaces (If-Match, If-None-Match: `*` for "none yet"). */
export interface WriteConditions {
  ifMatch?: string;
  ifNoneMatch?: string;
}

/** The client of the request being served went away: `onCancel` runs `cancel` then (at once if it already did). */
export interface Cancellation {
  onCancel(cancel: () => void): void;
}

/** What an uploaded body stores besides its bytes, and how long it is. */
export interface BodyHeaders {
  /** Unknown for a form upload's file: the body then goes chunked and its length is counted. */
  contentLength?: number;
  /** Stored headers known before the body: standard ones, a checksum sent as a header. */
  headers?: StoredHeaders;
  /** Stored headers known once the body has passed its checks (a trailer checksum). */
  trailingHeaders?: () => StoredHeaders | undefined;
}

export interface PutObjectInput extends BodyHeaders {
  contentType?: string;
  owner: string;
  /** No account signed the write (AllUsers WRITE admitted it; `owner` is the bucket owner): it never lands in a bucket created again. */
  anonymous?: boolean;
  userMetadata: Record<string, string>;
  /** x-amz-tagging, parsed and checked. */
  tags?: Tag[];
  /** Content-MD5 as sent (base64). */
  contentMd5?: string;
  /** x-service-md5: the hex MD5 claimed for an instant upload. */
  instantMd5?: string;
  ifMatch?: string;
  ifNoneMatch?: string;
  /** Server-side encryption the request asks (checked S3 headers); the bucket's default applies without it. */
  sse?: SseRequest;
  /** The bucket as the caller resolved and authorised it for this request: the write goes to that bucket. */
  bucketRecord?: BucketInfo;
}

export interface PutObjectResult {
  object: ObjectMeta;
  /** The body was not stored again: the owner already stores these bytes. */
  instant: boolean;
}

/** Which bytes of an object a read wants, under which conditions. */
export interface GetObjectInput {
  /** HEAD opens no body. */
  method: 'GET' | 'HEAD';
  /** A `bytes=` Range header as sent. */
  range?: string;
  /** One part of a multipart object (an object uploaded whole is its part 1); never with a range. */
  partNumber?: number;
  /** If-Match and the rest: decided from the metadata before the body is opened. */
  conditions?: ObjectConditions;
  /** Server-side encryption the request asks (checked S3 headers); the bucket's default applies without it. */
  sse?: SseRequest;
  /** The bucket as the caller resolved and authorised it for this request: the read is of that bucket. */
  bucketRecord?: BucketInfo;
}

/** A checksum with its algorithm's name. */
export interface NamedChecksum {
  algorithm: string;
  value: string;
}

/**
 * A read's answer. 412 is thrown (PreconditionFailed); 304 comes with the object's metadata and no
 * body; 200 / 206 with the body for a GET.
 */
export interface ObjectRead {
  status: 200 | 206 | 304;
  object: ObjectMeta;
  /** Bytes of the body answered (the range's or the part's). */
  contentLength: number;
  /** `bytes start-end/size` for a 206. */
  contentRange?: string;
  /** A multipart object's part count (a read of one part). */
  partsCount?: number;
  /** The part's own checksum (a read of one part of an upload with a checksum algorithm). */
  partChecksum?: NamedChecksum;
  /** The bytes (GET with status 200 or 206): the caller consumes or destroys it. */
  body?: Readable;
  /** Instead of `body`: the whole body already in memory (a small object answered from a cache). */
  bytes?: Buffer;
}

export interface CopyObjectInput {
  owner: string;
  /** No account signed the copy (AllUsers WRITE and READ admitted it; `owner` is the bucket owner): it never lands in a bucket created again. */
  anonymous?: boolean;
  sourceBucket: string;
  sourceKey: string;
  metadataDirective: 'COPY' | 'REPLACE';
  contentType?: string;
  userMetadata?: Record<string, string>;
  headers?: StoredHeaders;
  taggingDirective: 'COPY' | 'REPLACE';
  tags?: Tag[];
  checksumAlgorithm?: string;
  /** On the source (x-amz-copy-source-if-*). */
  conditions?: ObjectConditions;
  /** On the object the copy replaces (If-Match, If-None-Match). */
  destinationConditions?: WriteConditions;
  /** Server-side encryption the request asks (checked S3 headers); the bucket's default applies without it. */
  sse?: SseRequest;
  /** The buckets as the caller resolved and authorised them for this request: the copy reads and writes those. */
  bucketRecord?: BucketInfo;
  sourceBucketRecord?: BucketInfo;
}

/** A multipart upload's checksum algorithm and type (x-amz-checksum-algorithm, x-amz-checksum-type). */
export interface UploadChecksum {
  algorithm: string;
  type?: 'COMPOSITE' | 'FULL_OBJECT';
}

export interface CreateMultipartInput {
  owner: string;
  /**
   * No account signed the initiation (AllUsers WRITE admitted it; `owner` is the bucket owner): the upload's
   * initiator is the anonymous principal (ListPartsResult.anonymous), and it completes only into the bucket it began in.
   */
  anonymous?: boolean;
  contentType?: string;
  userMetadata?: Record<string, string>;
  tags?: Tag[];
  headers?: StoredHeaders;
  checksum?: UploadChecksum;
  /** Server-side encryption the request asks (checked S3 headers); the bucket's default applies without it. */
  sse?: SseRequest;
  /** The bucket as the caller resolved and authorised it for this request: the upload is of that bucket. */
  bucketRecord?: BucketInfo;
}

export interface UploadPartInput extends BodyHeaders {
  contentMd5?: string;
  /** The algorithm of the checksum the part carries (an upload with one requires it). */
  checksumAlgorithm?: string;
  /** Server-side encryption the request asks (checked S3 headers); the bucket's default applies without it. */
  sse?: SseRequest;
  /** The bucket as the caller resolved and authorised it for this request: the part is of that bucket's upload. */
  bucketRecord?: BucketInfo;
}

export interface UploadPartCopyInput {
  sourceBucket: string;
  sourceKey: string;
  range?: string;
  conditions?: ObjectConditions;
  /** Server-side encryption the request asks (checked S3 headers); the bucket's default applies without it. */
  sse?: SseRequest;
  /** The buckets as the caller resolved and authorised them for this request: the part copy reads and writes those. */
  bucketRecord?: BucketInfo;
  sourceBucketRecord?: BucketInfo;
}

export interface PartInfo {
  partNumber: number;
  etag: string;
  size: number;
  lastModified: string;
  /** Base64 of its checksum by the upload's algorithm (when the upload has one). */
  checksum?: string;
}

export interface ListPartsResult {
  parts: PartInfo[];
  isTruncated: boolean;
  nextPartNumberMarker?: number;
  initiated: string;
  owner: string;
  /** Initiated anonymously (CreateMultipartInput.anonymous): its initiator is the anonymous principal, not `owner`. */
  anonymous?: boolean;
  checksumAlgorithm?: string;
  checksumType?: string;
}

export interface CompletedPart {
  partNumber: number;
  etag: string;
  checksum?: NamedChecksum;
}

export interface UploadInfo {
  key: string;
  uploadId: string;
  initiated: string;
  owner: string;
}

export interface ListUploadsQuery {
  prefix?: string;
  delimiter?: string;
  keyMarker?: string;
  uploadIdMarker?: string;
  maxUploads?: number;
}

export interface ListUploadsResult {
  uploads: UploadInfo[];
  commonPrefixes?: string[];
  isTruncated: boolean;
  nextKeyMarker?: string;
  nextUploadIdMarker?: string;
}

/** A multipart object's part as stored (GetObjectAttributes). */
export interface StoredPart {
  partNumber: number;
  size: number;
  checksum?: string;
}

/** A new bucket's ownership controls and ACL where they are not the defaults (BucketOwnerEnforced, no grants). */
export type NewBucketAccess = Pick<Partial<BucketConfigs>, 'ownership' | 'acl'>;

/**
 * A method's last argument, `bucketRecord`, is the bucket as the caller resolved and authorised it for
 * this request (hack/adr/0007-bucket-resolution.md): the layer serves that bucket, by its row id, and
 * never resolves the name again; without it (a caller that resolved nothing) the name's current bucket.
 */
export interface ObjectLayer {
  // Buckets
  listBuckets(owner: string, query?: ListBucketsQuery): Promise<BucketListing[]>;
  /** `access`: ownership controls and an ACL other than the defaults, the new bucket's from its first moment. */
  createBucket(bucket: string, owner: string, backend?: BackendRef, access?: NewBucketAccess): Promise<BucketInfo>;
  getBucket(bucket: string): Promise<BucketInfo>;
  deleteBucket(bucket: string, bucketRecord?: BucketInfo): Promise<void>;
  /** One of the bucket's configurations (NoSuchLifecycleConfiguration / NoSuchCORSConfiguration / NoSuchTagSet when it has none). */
  getBucketConfig<K extends keyof BucketConfigs>(bucket: string, kind: K, bucketRecord?: BucketInfo): Promise<BucketConfigs[K]>;
  /** Replace one of the bucket's configurations; undefined removes it. */
  putBucketConfig<K extends keyof BucketConfigs>(bucket: string, kind: K, rules: BucketConfigs[K] | undefined, bucketRecord?: BucketInfo): Promise<void>;

  // Objects
  listObjects(bucket: string, query: ListObjectsQuery, bucketRecord?: BucketInfo): Promise<ListObjectsResult>;
  /** The object's metadata (NoSuchKey when there is none). */
  headObject(bucket: string, key: string, bucketRecord?: BucketInfo): Promise<ObjectMeta>;
  /** A multipart object's parts in part order (none for an object uploaded whole). */
  objectParts(bucket: string, key: string, bucketRecord?: BucketInfo): Promise<StoredPart[]>;
  /** Store a body as the object; resolves with the answer (on an instant hit before the body is read). */
  putObject(bucket: string, key: string, input: PutObjectInput, body: Readable, cancellation?: Cancellation): Promise<PutObjectResult>;
  /** Read the object (its metadata, and the body of a GET), the conditions decided before the body is opened. */
  getObject(bucket: string, key: string, input: GetObjectInput, cancellation?: Cancellation): Promise<ObjectRead>;
  /** The backend's own URL for the object, or undefined when the backend cannot serve it directly. */
  directUrl(bucket: string, key: string, expiresSeconds: number, bucketRecord?: BucketInfo): Promise<string | undefined>;
  copyObject(bucket: string, key: string, input: CopyObjectInput): Promise<ObjectMeta>;
  /** Replace the object's tags (none: remove them); NoSuchKey when there is no such object. */
  putObjectTags(bucket: string, key: string, tags: Tag[], bucketRecord?: BucketInfo): Promise<void>;
  /** Replace the ACL kept with the object (undefined: none, private to the bucket owner); NoSuchKey when there is no such object. */
  putObjectAcl(bucket: string, key: string, acl: AccessControlList | undefined, bucketRecord?: BucketInfo): Promise<void>;
  /** Soft delete; with conditions, NoSuchKey or PreconditionFailed unless the object meets them. */
  deleteObject(bucket: string, key: string, conditions?: DeleteConditions, bucketRecord?: BucketInfo): Promise<void>;
  deleteObjects(bucket: string, objects: Array<{ key: string } & DeleteConditions>, bucketRecord?: BucketInfo): Promise<DeleteObjectsResult>;

  // Multipart uploads
  createMultipart(
    bucket: string,
    key: string,
    input: CreateMultipartInput,
  ): Promise<{ uploadId: string; checksum?: Required<UploadChecksum>; sse?: SseAnswer }>;
  uploadPart(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    input: UploadPartInput,
    body: Readable,
    cancellation?: Cancellation,
  ): Promise<{ etag: string }>;
  uploadPartCopy(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    input: UploadPartCopyInput,
  ): Promise<{ etag: string; lastModified: string; checksum?: NamedChecksum }>;
  listParts(
    bucket: string,
    key: string,
    uploadId: string,
    query: { maxParts?: number; partNumberMarker?: number },
    bucketRecord?: BucketInfo,
  ): Promise<ListPartsResult>;
  /**
   * `checksum`: the whole object's, as the client sent it (x-amz-checksum-* on the Complete request). `anonymous`:
   * no account signed the completion, which then (as one of an upload begun anonymously) lands only in `bucketRecord`.
   */
  completeMultipart(
    bucket: string,
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    conditions?: WriteConditions,
    checksum?: NamedChecksum,
    bucketRecord?: BucketInfo,
    anonymous?: boolean,
  ): Promise<ObjectMeta>;
  abortMultipart(bucket: string, key: string, uploadId: string, bucketRecord?: BucketInfo): Promise<void>;
  listUploads(bucket: string, query: ListUploadsQuery, bucketRecord?: BucketInfo): Promise<ListUploadsResult>;
}
