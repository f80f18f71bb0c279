import type { Readable } from 'node:stream';
import type { ChecksumAlgorithm, ObjectConditions, SseRequest, StoredHeaders, Tag, WriteConditions } from '../../../object-model/src/index.js';
import type { BucketRef } from '../catalog/catalog.js';

/** What ObjectService.put and ObjectService.copy are asked: the data plane's routes read them from the internal API. */
export interface PutRequest {
  bucket: string;
  key: string;
  owner?: string;
  /** No account signed the write (x-strata-anonymous): it commits only to the bucket that admitted it. */
  anonymous?: boolean;
  body: Readable;
  contentLength?: number;
  contentType?: string;
  userMetadata?: Record<string, string>;
  /** x-amz-tagging, checked by whoever parsed it. */
  tags?: Tag[];
  /** Stored headers known before the body (Cache-Control, ..., a checksum sent as a header). */
  headers?: StoredHeaders;
  /** Stored headers known once the whole body has arrived (a checksum the client sent after it). */
  trailingHeaders?: () => Promise<StoredHeaders | undefined>;
  /** Hex MD5 from Content-MD5. */
  contentMd5?: string;
  /** The MD5 the client claims for an instant upload: 32 lower-case hex digits, as readInstantMd5 reads it. */
  instantMd5?: string;
  conditions?: WriteConditions;
  /** Server-side encryption asked by the request (else the bucket's default). */
  sse?: SseRequest;
  /** The bucket as the gateway resolved and authorised it (x-strata-bucket); without it the name is looked up. */
  resolvedBucket?: BucketRef;
}

export interface CopyRequest {
  bucket: string;
  key: string;
  /** The destination and source buckets as the gateway resolved and authorised them (x-strata-bucket, x-strata-source-bucket). */
  resolvedBucket?: BucketRef;
  resolvedSourceBucket?: BucketRef;
  owner?: string;
  /** No account signed the copy (as a PutObject's x-strata-anonymous): it commits only to the bucket that admitted it. */
  anonymous?: boolean;
  sourceBucket: string;
  sourceKey: string;
  metadataDirective?: 'COPY' | 'REPLACE';
  contentType?: string;
  userMetadata?: Record<string, string>;
  /**
   * With REPLACE, the new standard headers (the checksum stays the source's: the bytes are the same); with
   * COPY only a website redirect is read from them (the source's is never copied, see copiedHeaders).
   */
  headers?: StoredHeaders;
  /** x-amz-tagging-directive: COPY (the default) keeps the source's tags, REPLACE takes `tags`. */
  taggingDirective?: 'COPY' | 'REPLACE';
  tags?: Tag[];
  /**
   * x-amz-checksum-algorithm: the copy's checksum is of this algorithm over the whole object (computed
   * from the bytes unless the source already has that one); without it the source's checksum is kept.
   */
  checksumAlgorithm?: ChecksumAlgorithm;
  /** x-amz-copy-source-if-*: conditions on the source. */
  conditions?: ObjectConditions;
  /** If-Match / If-None-Match: conditions on the object the copy replaces, checked by its commit. */
  destinationConditions?: WriteConditions;
  /** The copy's encryption (else the bucket's default), and the source's customer key (copySourceCustomerKey). */
  sse?: SseRequest;
}
