import type http from 'node:http';
import type { Readable } from 'node:stream';
import { InternalHttp, type Cancellation, type Guard, readText, seg } from './internal-http.js';
import { asciiJson, type StoredHeaders, type Tag } from '../../../service-kit/src/index.js';
import type { ObjectMeta } from './control-plane.js';

export interface PutObjectHeaders {
  /** Unknown for a form upload's file: the body then goes chunked and the data plane counts it. */
  contentLength?: number;
  contentType?: string;
  owner: string;
  userMetadata: Record<string, string>;
  /** x-amz-tagging, parsed and checked. */
  tags?: Tag[];
  /** Stored headers known before the body: standard ones, a checksum sent as a header. */
  headers?: StoredHeaders;
  /** Stored headers known once the body has passed its checks (a trailer checksum): sent as a trailer. */
  trailingHeaders?: () => StoredHeaders | undefined;
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

  /** Stream a body up; resolves with the data plane's answer (on an instant hit before the body is sent). */
  async putObject(bucket: string, key: string, h: PutObjectHeaders, body: Readable, cancellation?: Cancellation): Promise<{ object: ObjectMeta; instant: boolean }> {
    const { trailingHeaders } = h;
    // Trailers need a chunked body: its length then travels as x-strata-content-length.
    const length = trailingHeaders ? 'x-strata-content-length' : 'content-length';
    const res = await this.http.stream({
      method: 'PUT',
      path: `/internal/objects/${seg(bucket)}/${seg(key)}`,
      headers: {
        ...(h.contentLength !== undefined ? { [length]: h.contentLength } : {}),
        'content-type': h.contentType ?? 'application/octet-stream',
        'x-strata-owner': h.owner,
        'x-strata-meta': JSON.stringify(h.userMetadata),
        ...(h.tags?.length ? { 'x-strata-tags': asciiJson(h.tags) } : {}),
        ...(h.headers ? { 'x-strata-headers': asciiJson(h.headers) } : {}),
        ...(trailingHeaders ? { trailer: 'x-strata-trailing-headers' } : {}),
        ...(h.contentMd5 ? { 'x-strata-content-md5': h.contentMd5 } : {}),
        ...(h.instantMd5 ? { 'x-strata-instant-md5': h.instantMd5 } : {}),
        ...(h.ifMatch ? { 'if-match': h.ifMatch } : {}),
        ...(h.ifNoneMatch ? { 'if-none-match': h.ifNoneMatch } : {}),
      },
      body,
      ...(trailingHeaders ? { trailers: () => ({ 'x-strata-trailing-headers': asciiJson(trailingHeaders() ?? {}) }) } : {}),
      cancellation,
    });
    return JSON.parse(await readText(res)) as { object: ObjectMeta; instant: boolean };
  }

  /** GET or HEAD the bytes; the caller pipes the response (and must consume or destroy it). */
  getObject(method: 'GET' | 'HEAD', bucket: string, key: string, range: string | undefined, cancellation?: Cancellation): Promise<http.IncomingMessage> {
    return this.http.stream({ method, path: `/internal/objects/${seg(bucket)}/${seg(key)}`, headers: range ? { range } : {}, cancellation });
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
      conditions?: CopyConditions;
    },
  ): Promise<ObjectMeta> {
    return this.http.json('POST', `/internal/objects/${seg(bucket)}/${seg(key)}/copy`, { body, long: true });
  }

  createMultipart(bucket: string, key: string, body: { owner: string; contentType?: string; userMetadata?: Record<string, string>; tags?: Tag[]; headers?: StoredHeaders }): Promise<{ uploadId: string }> {
    return this.http.json('POST', `/internal/multipart/${seg(bucket)}/${seg(key)}`, { body });
  }

  async uploadPart(bucket: string, key: string, uploadId: string, partNumber: number, h: { contentLength: number; contentMd5?: string }, body: Readable, cancellation?: Cancellation): Promise<{ etag: string }> {
    const res = await this.http.stream({
      method: 'PUT',
      path: `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts/${partNumber}`,
      headers: { 'content-length': h.contentLength, 'content-type': 'application/octet-stream', ...(h.contentMd5 ? { 'x-strata-content-md5': h.contentMd5 } : {}) },
      body,
      cancellation,
    });
    return JSON.parse(await readText(res)) as { etag: string };
  }

  uploadPartCopy(bucket: string, key: string, uploadId: string, partNumber: number, body: { sourceBucket: string; sourceKey: string; range?: string }): Promise<{ etag: string; lastModified: string }> {
    return this.http.json('PUT', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts/${partNumber}/copy`, { body, long: true });
  }

  listParts(bucket: string, key: string, uploadId: string, q: { maxParts?: number; partNumberMarker?: number }): Promise<{ parts: PartInfo[]; isTruncated: boolean; nextPartNumberMarker?: number; initiated: string; owner: string }> {
    return this.http.json('GET', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts`, { query: { ...q } });
  }

  completeMultipart(bucket: string, key: string, uploadId: string, parts: Array<{ partNumber: number; etag: string }>, conditions?: { ifMatch?: string; ifNoneMatch?: string }): Promise<ObjectMeta> {
    return this.http.json('POST', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/complete`, { body: { parts, ...(conditions ? { conditions } : {}) }, long: true });
  }

  async abortMultipart(bucket: string, key: string, uploadId: string): Promise<void> {
    await this.http.json('DELETE', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}`);
  }

  listUploads(bucket: string, q: { prefix?: string; keyMarker?: string; uploadIdMarker?: string; maxUploads?: number }): Promise<{ uploads: UploadInfo[]; isTruncated: boolean }> {
    return this.http.json('GET', `/internal/multipart/${seg(bucket)}`, { query: { ...q } });
  }
}
