import type http from 'node:http';
import type { Readable } from 'node:stream';
import { InternalHttp, type Cancellation, type Guard, readText, seg } from './internal-http.js';
import { asciiJson, type StoredHeaders, type Tag } from '../../../object-model/src/index.js';
import type { ObjectMeta } from './control-plane.js';

/** What an uploaded body stores besides its bytes, and how long it is. */
export interface BodyHeaders {
  /** Unknown for a form upload's file: the body then goes chunked and the data plane counts it. */
  contentLength?: number;
  /** Stored headers known before the body: standard ones, a checksum sent as a header. */
  headers?: StoredHeaders;
  /** Stored headers known once the body has passed its checks (a trailer checksum): sent as a trailer. */
  trailingHeaders?: () => StoredHeaders | undefined;
}

export interface PutObjectHeaders extends BodyHeaders {
  contentType?: string;
  owner: string;
  userMetadata: Record<string, string>;
  /** x-amz-tagging, parsed and checked. */
  tags?: Tag[];
  contentMd5?: string;
  instantMd5?: string;
  ifMatch?: string;
  ifNoneMatch?: string;
}

export interface CopyConditions {
  ifMatch?: string;
  ifNoneMatch?: string;
  ifModifiedSince?: string;
  ifUnmodifiedSince?: string;
}

export interface PartInfo {
  partNumber: number;
  etag: string;
  size: number;
  lastModified: string;
  /** Base64 of its checksum by the upload's algorithm (when the upload has one). */
  checksum?: string;
}

/** A multipart upload's checksum algorithm and type (x-amz-checksum-algorithm, x-amz-checksum-type). */
export interface UploadChecksum {
  algorithm: string;
  type?: 'COMPOSITE' | 'FULL_OBJECT';
}

/** A checksum with its algorithm's name. */
export interface NamedChecksum {
  algorithm: string;
  value: string;
}

export interface UploadInfo {
  key: string;
  uploadId: string;
  initiated: string;
  owner: string;
}

/** Typed client for the data plane: object bytes, copy, multipart (ADR 0001). */
export class DataPlaneClient {
  readonly http: InternalHttp;

  constructor(baseUrl: string, token: string, guard?: Guard) {
    this.http = new InternalHttp(baseUrl, token, 'data plane', guard);
  }

  /**
   * Stream a body up with its length and stored headers. Headers known only once the body has
   * passed (a trailer checksum) go as a trailer, which needs a chunked body: its length then travels
   * as x-strata-content-length.
   */
  private async upload<T>(path: string, h: BodyHeaders, headers: http.OutgoingHttpHeaders, body: Readable, cancellation?: Cancellation): Promise<T> {
    const { trailingHeaders } = h;
    const res = await this.http.stream({
      method: 'PUT',
      path,
      headers: {
        ...(h.contentLength !== undefined ? { [trailingHeaders ? 'x-strata-content-length' : 'content-length']: h.contentLength } : {}),
        ...(h.headers ? { 'x-strata-headers': asciiJson(h.headers) } : {}),
        ...(trailingHeaders ? { trailer: 'x-strata-trailing-headers' } : {}),
        ...headers,
      },
      body,
      ...(trailingHeaders ? { trailers: () => ({ 'x-strata-trailing-headers': asciiJson(trailingHeaders() ?? {}) }) } : {}),
      cancellation,
    });
    return JSON.parse(await readText(res)) as T;
  }

  /** Stream a body up; resolves with the data plane's answer (on an instant hit before the body is sent). */
  putObject(bucket: string, key: string, h: PutObjectHeaders, body: Readable, cancellation?: Cancellation): Promise<{ object: ObjectMeta; instant: boolean }> {
    return this.upload(
      `/internal/objects/${seg(bucket)}/${seg(key)}`,
      h,
      {
        'content-type': h.contentType ?? 'application/octet-stream',
        'x-strata-owner': h.owner,
        'x-strata-meta': JSON.stringify(h.userMetadata),
        ...(h.tags?.length ? { 'x-strata-tags': asciiJson(h.tags) } : {}),
        ...(h.contentMd5 ? { 'x-strata-content-md5': h.contentMd5 } : {}),
        ...(h.instantMd5 ? { 'x-strata-instant-md5': h.instantMd5 } : {}),
        ...(h.ifMatch ? { 'if-match': h.ifMatch } : {}),
        ...(h.ifNoneMatch ? { 'if-none-match': h.ifNoneMatch } : {}),
      },
      body,
      cancellation,
    );
  }

  /** GET or HEAD the bytes (a Range, or one part); the caller pipes the response (and must consume or destroy it). */
  getObject(
    method: 'GET' | 'HEAD',
    bucket: string,
    key: string,
    which: { range?: string; partNumber?: number },
    cancellation?: Cancellation,
  ): Promise<http.IncomingMessage> {
    return this.http.stream({
      method,
      path: `/internal/objects/${seg(bucket)}/${seg(key)}`,
      headers: which.range ? { range: which.range } : {},
      ...(which.partNumber !== undefined ? { query: { partNumber: which.partNumber } } : {}),
      cancellation,
    });
  }

  /** The backend's own URL for the object, or undefined when the backend cannot serve it directly. */
  async directUrl(bucket: string, key: string, expires: number): Promise<string | undefined> {
    try {
      const r = await this.http.json<{ url: string }>('GET', `/internal/objects/${seg(bucket)}/${seg(key)}`, { query: { 'direct-url': true, expires } });
      return r.url;
    } catch (err) {
      if ((err as { code?: string }).code === 'NotImplemented') return undefined;
      throw err;
    }
  }

  copyObject(
    bucket: string,
    key: string,
    body: {
      owner: string;
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
      conditions?: CopyConditions;
      /** On the object the copy replaces (If-Match, If-None-Match). */
      destinationConditions?: { ifMatch?: string; ifNoneMatch?: string };
    },
  ): Promise<ObjectMeta> {
    return this.http.json('POST', `/internal/objects/${seg(bucket)}/${seg(key)}/copy`, { body, long: true });
  }

  createMultipart(
    bucket: string,
    key: string,
    body: { owner: string; contentType?: string; userMetadata?: Record<string, string>; tags?: Tag[]; headers?: StoredHeaders; checksum?: UploadChecksum },
  ): Promise<{ uploadId: string; checksum?: Required<UploadChecksum> }> {
    return this.http.json('POST', `/internal/multipart/${seg(bucket)}/${seg(key)}`, { body });
  }

  /** A part's bytes, with the algorithm of the checksum it carries (an upload with one requires it). */
  uploadPart(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    h: BodyHeaders & { contentMd5?: string; checksumAlgorithm?: string },
    body: Readable,
    cancellation?: Cancellation,
  ): Promise<{ etag: string }> {
    return this.upload(
      `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts/${partNumber}`,
      h,
      {
        'content-type': 'application/octet-stream',
        ...(h.contentMd5 ? { 'x-strata-content-md5': h.contentMd5 } : {}),
        ...(h.checksumAlgorithm ? { 'x-strata-checksum-algorithm': h.checksumAlgorithm } : {}),
      },
      body,
      cancellation,
    );
  }

  uploadPartCopy(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    body: { sourceBucket: string; sourceKey: string; range?: string; conditions?: CopyConditions },
  ): Promise<{ etag: string; lastModified: string; checksum?: NamedChecksum }> {
    return this.http.json('PUT', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts/${partNumber}/copy`, { body, long: true });
  }

  listParts(
    bucket: string,
    key: string,
    uploadId: string,
    q: { maxParts?: number; partNumberMarker?: number },
  ): Promise<{ parts: PartInfo[]; isTruncated: boolean; nextPartNumberMarker?: number; initiated: string; owner: string; checksumAlgorithm?: string; checksumType?: string }> {
    return this.http.json('GET', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts`, { query: { ...q } });
  }

  /** `checksum`: the whole object's, as the client sent it (x-amz-checksum-* on the Complete request). */
  completeMultipart(
    bucket: string,
    key: string,
    uploadId: string,
    parts: Array<{ partNumber: number; etag: string; checksum?: NamedChecksum }>,
    conditions?: { ifMatch?: string; ifNoneMatch?: string },
    checksum?: NamedChecksum,
  ): Promise<ObjectMeta> {
    return this.http.json('POST', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/complete`, {
      body: { parts, ...(conditions ? { conditions } : {}), ...(checksum ? { checksum } : {}) },
      long: true,
    });
  }

  async abortMultipart(bucket: string, key: string, uploadId: string): Promise<void> {
    await this.http.json('DELETE', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}`);
  }

  listUploads(
    bucket: string,
    q: { prefix?: string; delimiter?: string; keyMarker?: string; uploadIdMarker?: string; maxUploads?: number },
  ): Promise<{ uploads: UploadInfo[]; commonPrefixes?: string[]; isTruncated: boolean; nextKeyMarker?: string; nextUploadIdMarker?: string }> {
    return this.http.json('GET', `/internal/multipart/${seg(bucket)}`, { query: { ...q } });
  }
}
