import type http from 'node:http';
import type { Readable } from 'node:stream';
import { bucketRecordHeader } from './bucket-record-header.js';
import { InternalHttp, type Cancellation, type Guard, seg } from './internal-http.js';
import {
  ANONYMOUS_WRITE_HEADER,
  CREATE_MULTIPART_ANSWER,
  DIRECT_URL_ANSWER,
  LIST_PARTS_ANSWER,
  LIST_UPLOADS_ANSWER,
  NO_ANSWER,
  OBJECT_META_ANSWER,
  PUT_OBJECT_ANSWER,
  UPLOAD_PART_ANSWER,
  UPLOAD_PART_COPY_ANSWER,
  type AnswerSchema,
  encodeSseRequest,
  readSseAnswer,
  SSE_ANSWER_HEADER,
  SSE_REQUEST_HEADER,
  type SseAnswer,
  type SseRequest,
  S3Error,
  SOURCE_BUCKET_HEADER,
  encodeWireHeader,
  readWireHeaderLeniently,
  STORED_HEADERS_HEADER,
  TAGS_HEADER,
  TRAILING_HEADERS_TRAILER,
  USER_METADATA_HEADER,
  type BodyHeaders,
  type BucketInfo,
  type CompletedPart,
  type CopyObjectInput,
  type CreateMultipartInput,
  type GetObjectInput,
  type ListPartsResult,
  type ListUploadsQuery,
  type ListUploadsResult,
  type NamedChecksum,
  type ObjectMeta,
  type ObjectRead,
  type PutObjectInput,
  type PutObjectResult,
  unquoteEtag,
  type UploadChecksum,
  type UploadPartCopyInput,
  type UploadPartInput,
  type WriteConditions,
} from '../../../object-model/src/index.js';

/** A count the data plane answered in a header: a whole number of bytes, or InternalError naming the header. */
function countHeader(name: string, raw: string | string[] | undefined): number {
  const n = typeof raw === 'string' && raw !== '' ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw malformedRead(name);
  return n;
}

function malformedRead(name: string): S3Error {
  return new S3Error('InternalError', `the data plane gave a malformed answer to a read (${name})`);
}

/**
 * The data plane's answer to a GET or HEAD of an object, as the object layer's typed read. What the
 * read depends on (size, length, ETag, Last-Modified) must be well formed: otherwise InternalError,
 * never a NaN or an Invalid Date flowing on. Informative properties (tags, metadata, stored headers)
 * that are malformed are left out rather than failing the read. Plain checks, no schema: this is the
 * hot GET path.
 */
export function objectReadOf(bucket: string, key: string, res: http.IncomingMessage, withBody: boolean): ObjectRead {
  const h = res.headers;
  const status = res.statusCode === 304 ? 304 : res.statusCode === 206 ? 206 : 200;
  // A 304 carries no body, and so no length.
  const contentLength = status === 304 && h['content-length'] === undefined ? 0 : countHeader('content-length', h['content-length']);
  const contentRange = typeof h['content-range'] === 'string' ? h['content-range'] : undefined;
  const etag = typeof h.etag === 'string' ? unquoteEtag(h.etag) : '';
  if (!etag) throw malformedRead('etag');
  const lastModified = Date.parse(String(h['last-modified']));
  if (Number.isNaN(lastModified)) throw malformedRead('last-modified');
  const tags = readWireHeaderLeniently(TAGS_HEADER, h[TAGS_HEADER.name]);
  const headers = readWireHeaderLeniently(STORED_HEADERS_HEADER, h[STORED_HEADERS_HEADER.name]);
  const object: ObjectMeta = {
    bucket,
    key,
    // (Its own header; a server without it is read by the range's total or the length.)
    size: countHeader('x-strata-size', h['x-strata-size'] ?? contentRange?.split('/')[1] ?? String(contentLength)),
    etag,
    // The content MD5 stays in the data plane (the ETag is what clients see).
    md5: null,
    contentType: String(h['content-type'] ?? 'application/octet-stream'),
    userMetadata: readWireHeaderLeniently(USER_METADATA_HEADER, h[USER_METADATA_HEADER.name]) ?? {},
    lastModified: new Date(lastModified).toISOString(),
    ...(tags?.length ? { tags } : {}),
    ...(headers ? { headers } : {}),
  };
  const sse = readSseAnswer(h[SSE_ANSWER_HEADER]);
  if (sse) object.sse = sse;
  const [partAlgorithm, partChecksum] = String(h['x-strata-part-checksum'] ?? '').split(' ');
  const partsCount = h['x-amz-mp-parts-count'];
  return {
    status,
    object,
    contentLength,
    ...(contentRange ? { contentRange } : {}),
    ...(partsCount !== undefined ? { partsCount: countHeader('x-amz-mp-parts-count', partsCount) } : {}),
    ...(partAlgorithm && partChecksum ? { partChecksum: { algorithm: partAlgorithm, value: partChecksum } } : {}),
    ...(withBody && status !== 304 ? { body: res } : {}),
  };
}

/** The internal header of a request's encryption (none when it asks nothing). */
function sseHeaders(sse: SseRequest | undefined): http.OutgoingHttpHeaders {
  const value = encodeSseRequest(sse);
  return value ? { [SSE_REQUEST_HEADER]: value } : {};
}

/** Typed client for the data plane: object bytes, copy, multipart (ADR 0001). Calls are guarded per bucket (their breaker scope). */
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
  private async upload<T>(
    path: string,
    answer: AnswerSchema<T>,
    h: BodyHeaders,
    headers: http.OutgoingHttpHeaders,
    body: Readable,
    cancellation?: Cancellation,
  ): Promise<T> {
    const { trailingHeaders } = h;
    const res = await this.http.stream({
      method: 'PUT',
      path,
      headers: {
        ...(h.contentLength !== undefined ? { [trailingHeaders ? 'x-strata-content-length' : 'content-length']: h.contentLength } : {}),
        ...(h.headers ? { [STORED_HEADERS_HEADER.name]: encodeWireHeader(STORED_HEADERS_HEADER, h.headers) } : {}),
        ...(trailingHeaders ? { trailer: TRAILING_HEADERS_TRAILER.name } : {}),
        ...headers,
      },
      body,
      ...(trailingHeaders
        ? { trailers: () => ({ [TRAILING_HEADERS_TRAILER.name]: encodeWireHeader(TRAILING_HEADERS_TRAILER, trailingHeaders() ?? {}) }) }
        : {}),
      cancellation,
    });
    return this.http.readAnswer(res, answer, `PUT ${path}`);
  }

  /** Stream a body up; resolves with the data plane's answer (on an instant hit before the body is sent). */
  putObject(bucket: string, key: string, h: PutObjectInput, body: Readable, cancellation?: Cancellation): Promise<PutObjectResult> {
    return this.upload(
      `/internal/objects/${seg(bucket)}/${seg(key)}`,
      PUT_OBJECT_ANSWER,
      h,
      {
        'content-type': h.contentType ?? 'application/octet-stream',
        'x-strata-owner': h.owner,
        ...(h.anonymous ? { [ANONYMOUS_WRITE_HEADER.name]: encodeWireHeader(ANONYMOUS_WRITE_HEADER, true) } : {}),
        [USER_METADATA_HEADER.name]: encodeWireHeader(USER_METADATA_HEADER, h.userMetadata),
        ...(h.tags?.length ? { [TAGS_HEADER.name]: encodeWireHeader(TAGS_HEADER, h.tags) } : {}),
        ...(h.contentMd5 ? { 'x-strata-content-md5': h.contentMd5 } : {}),
        ...(h.instantMd5 ? { 'x-strata-instant-md5': h.instantMd5 } : {}),
        ...(h.ifMatch ? { 'if-match': h.ifMatch } : {}),
        ...(h.ifNoneMatch ? { 'if-none-match': h.ifNoneMatch } : {}),
        ...sseHeaders(h.sse),
        ...bucketRecordHeader(h.bucketRecord),
      },
      body,
      cancellation,
    );
  }

  /**
   * GET or HEAD the object (a Range, or one part) under its conditions, which the data plane decides from
   * the metadata before it opens the body. A GET's body is the caller's to consume or destroy.
   */
  async getObject(bucket: string, key: string, input: GetObjectInput, cancellation?: Cancellation): Promise<ObjectRead> {
    const c = input.conditions;
    const res = await this.http.stream({
      method: input.method,
      path: `/internal/objects/${seg(bucket)}/${seg(key)}`,
      headers: {
        ...(input.range ? { range: input.range } : {}),
        ...(c?.ifMatch !== undefined ? { 'if-match': c.ifMatch } : {}),
        ...(c?.ifNoneMatch !== undefined ? { 'if-none-match': c.ifNoneMatch } : {}),
        ...(c?.ifModifiedSince !== undefined ? { 'if-modified-since': c.ifModifiedSince } : {}),
        ...(c?.ifUnmodifiedSince !== undefined ? { 'if-unmodified-since': c.ifUnmodifiedSince } : {}),
        ...sseHeaders(input.sse),
        ...bucketRecordHeader(input.bucketRecord),
      },
      ...(input.partNumber !== undefined ? { query: { partNumber: input.partNumber } } : {}),
      cancellation,
      scope: bucket,
    });
    let read: ObjectRead;
    try {
      read = objectReadOf(bucket, key, res, input.method === 'GET');
    } catch (err) {
      res.destroy();
      throw err;
    }
    if (!read.body) res.resume();
    return read;
  }

  /** The backend's own URL for the object, or undefined when the backend cannot serve it directly. */
  async directUrl(bucket: string, key: string, expires: number, bucketRecord?: BucketInfo): Promise<string | undefined> {
    try {
      const r = await this.http.json('GET', `/internal/objects/${seg(bucket)}/${seg(key)}`, DIRECT_URL_ANSWER, {
        query: { 'direct-url': true, expires },
        headers: bucketRecordHeader(bucketRecord),
        scope: bucket,
      });
      return r.url;
    } catch (err) {
      if ((err as { code?: string }).code === 'NotImplemented') return undefined;
      throw err;
    }
  }

  copyObject(bucket: string, key: string, { sse, bucketRecord, sourceBucketRecord, ...body }: CopyObjectInput): Promise<ObjectMeta> {
    return this.http.json('POST', `/internal/objects/${seg(bucket)}/${seg(key)}/copy`, OBJECT_META_ANSWER, {
      body,
      headers: { ...sseHeaders(sse), ...bucketRecordHeader(bucketRecord), ...bucketRecordHeader(sourceBucketRecord, SOURCE_BUCKET_HEADER) },
      long: true,
    });
  }

  createMultipart(
    bucket: string,
    key: string,
    { sse, bucketRecord, ...body }: CreateMultipartInput,
  ): Promise<{ uploadId: string; checksum?: Required<UploadChecksum>; sse?: SseAnswer }> {
    return this.http.json('POST', `/internal/multipart/${seg(bucket)}/${seg(key)}`, CREATE_MULTIPART_ANSWER, {
      body,
      headers: { ...sseHeaders(sse), ...bucketRecordHeader(bucketRecord) },
      scope: bucket,
    });
  }

  /** A part's bytes, with the algorithm of the checksum it carries (an upload with one requires it). */
  uploadPart(
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    h: UploadPartInput,
    body: Readable,
    cancellation?: Cancellation,
  ): Promise<{ etag: string }> {
    return this.upload(
      `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts/${partNumber}`,
      UPLOAD_PART_ANSWER,
      h,
      {
        'content-type': 'application/octet-stream',
        ...(h.contentMd5 ? { 'x-strata-content-md5': h.contentMd5 } : {}),
        ...(h.checksumAlgorithm ? { 'x-strata-checksum-algorithm': h.checksumAlgorithm } : {}),
        ...sseHeaders(h.sse),
        ...bucketRecordHeader(h.bucketRecord),
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
    { sse, bucketRecord, sourceBucketRecord, ...body }: UploadPartCopyInput,
  ): Promise<{ etag: string; lastModified: string; checksum?: NamedChecksum }> {
    return this.http.json('PUT', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts/${partNumber}/copy`, UPLOAD_PART_COPY_ANSWER, {
      body,
      headers: { ...sseHeaders(sse), ...bucketRecordHeader(bucketRecord), ...bucketRecordHeader(sourceBucketRecord, SOURCE_BUCKET_HEADER) },
      long: true,
    });
  }

  listParts(
    bucket: string,
    key: string,
    uploadId: string,
    q: { maxParts?: number; partNumberMarker?: number },
    bucketRecord?: BucketInfo,
  ): Promise<ListPartsResult> {
    return this.http.json('GET', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/parts`, LIST_PARTS_ANSWER, {
      query: { ...q },
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  /** `checksum`: the whole object's, as the client sent it (x-amz-checksum-* on the Complete request). */
  completeMultipart(
    bucket: string,
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    conditions?: WriteConditions,
    checksum?: NamedChecksum,
    bucketRecord?: BucketInfo,
    anonymous?: boolean,
  ): Promise<ObjectMeta> {
    return this.http.json('POST', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}/complete`, OBJECT_META_ANSWER, {
      body: { parts, ...(conditions ? { conditions } : {}), ...(checksum ? { checksum } : {}), ...(anonymous ? { anonymous } : {}) },
      headers: bucketRecordHeader(bucketRecord),
      long: true,
    });
  }

  async abortMultipart(bucket: string, key: string, uploadId: string, bucketRecord?: BucketInfo): Promise<void> {
    await this.http.json('DELETE', `/internal/multipart/${seg(bucket)}/${seg(key)}/${seg(uploadId)}`, NO_ANSWER, {
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  listUploads(bucket: string, q: ListUploadsQuery, bucketRecord?: BucketInfo): Promise<ListUploadsResult> {
    return this.http.json('GET', `/internal/multipart/${seg(bucket)}`, LIST_UPLOADS_ANSWER, {
      query: { ...q },
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }
}
