import type http from 'node:http';
import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import express, { type Request, type Router } from 'express';
import {
  ANONYMOUS_WRITE_HEADER,
  checkPartNumber,
  contentMd5Hex,
  encodeWireHeader,
  header,
  notModified,
  readBlobCollectionBody,
  readCompleteMultipartBody,
  readCopyObjectBody,
  readCreateMultipartBody,
  readMultipartExpiryBody,
  readConditions,
  readInstantMd5,
  readPageSize,
  readPartCopyBody,
  readPartNumber,
  readWholeNumber,
  readWireHeader,
  readWriteConditions,
  BUCKET_HEADER,
  SOURCE_BUCKET_HEADER,
  readSseRequest,
  S3Error,
  SSE_ANSWER_HEADER,
  SSE_REQUEST_HEADER,
  STORED_HEADERS_HEADER,
  storedChecksum,
  TAGS_HEADER,
  TRAILING_HEADERS_TRAILER,
  USER_METADATA_HEADER,
  type StoredHeaders,
} from '../../../object-model/src/index.js';
import { requestBody, sendJson } from '../../../service-kit/src/index.js';
import type { ByteRange } from '../backends/storage-backend.js';
import type { StoredObject } from '../catalog/catalog.js';
import type { BlobCollector } from '../gc/blob-collector.js';
import type { MultipartService } from '../uploads/multipart-service.js';
import type { ObjectService } from '../uploads/object-service.js';

export interface RouteDeps {
  objects: ObjectService;
  multipart: MultipartService;
  collector: BlobCollector;
  /** Run an outbox relay pass soon (rows the control plane just committed); a no-op without a broker. */
  kickOutbox: () => void;
}

const p = (req: Request, name: string) => String(req.params[name]);
const q = (req: Request, name: string) => (typeof req.query[name] === 'string' ? (req.query[name] as string) : undefined);

/** Bodies up to this size are answered with one res.end(buffer) instead of a piped stream. */
const SMALL_BODY = 64 * 1024;

function readAll(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    stream.once('error', reject);
  });
}

/**
 * The body's length: x-strata-content-length where the request's own length is not the body's (a
 * chunked body, which ends in trailers; a body handed over in-process, see requestBody), else
 * Content-Length. The backend checks the bytes that arrive against it.
 */
function contentLength(req: http.IncomingMessage): number | undefined {
  const raw = header(req, 'x-strata-content-length') ?? header(req, 'content-length');
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) throw new S3Error('InvalidArgument', 'Content-Length must be a non-negative integer');
  return Number(raw);
}

/** x-strata-content-md5: the client's Content-MD5 (base64) as hex; InvalidDigest when it is not 16 bytes of base64. */
const contentMd5 = (req: http.IncomingMessage) => contentMd5Hex(header(req, 'x-strata-content-md5'));

/** Stored headers of a body: those sent ahead (x-strata-headers) and those in its trailer, read once it has arrived. */
function bodyHeaders(req: http.IncomingMessage): { headers?: StoredHeaders; trailingHeaders: () => Promise<StoredHeaders | undefined> } {
  return {
    headers: readWireHeader(STORED_HEADERS_HEADER, header(req, STORED_HEADERS_HEADER.name)),
    trailingHeaders: async () => {
      // (Trailers are parsed with the body's end, which a backend may not have waited for.)
      if (!req.complete) await finished(req);
      return readWireHeader(TRAILING_HEADERS_TRAILER, req.trailers[TRAILING_HEADERS_TRAILER.name]);
    },
  };
}

/** One `bytes=` range against a size: undefined = serve everything (absent or unparseable, as S3 does). */
export function parseRange(header: string | undefined, size: number): ByteRange | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) throw new S3Error('InvalidRange', undefined, { RangeRequested: header, ActualObjectSize: String(size) });
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return undefined;
  }
  if (start >= size) throw new S3Error('InvalidRange', undefined, { RangeRequested: header, ActualObjectSize: String(size) });
  return { start, end };
}

/**
 * The bytes of part `partNumber` (GetObject/HeadObject `?partNumber=`): a multipart object's part by
 * its stored sizes; an object uploaded whole is its own part 1. InvalidPartNumber past the last part;
 * undefined for an empty part (nothing to range over).
 */
export function partRange(partNumber: number, object: Pick<StoredObject, 'size' | 'partSizes'>): ByteRange | undefined {
  const sizes = object.partSizes ?? [object.size];
  checkPartNumber(partNumber);
  if (partNumber > sizes.length)
    throw new S3Error('InvalidPartNumber', undefined, { PartNumberRequested: String(partNumber), ActualPartCount: String(sizes.length) });
  let start = 0;
  for (let i = 0; i < partNumber - 1; i++) start += sizes[i]!;
  const size = sizes[partNumber - 1]!;
  return size > 0 ? { start, end: start + size - 1 } : undefined;
}

function objectHeaders(res: http.ServerResponse, object: StoredObject): void {
  res.setHeader('etag', `"${object.etag}"`);
  res.setHeader('last-modified', new Date(object.lastModified).toUTCString());
  res.setHeader('content-type', object.contentType);
  res.setHeader('x-strata-size', String(object.size));
  res.setHeader('accept-ranges', 'bytes');
  res.setHeader(USER_METADATA_HEADER.name, encodeWireHeader(USER_METADATA_HEADER, object.userMetadata));
  if (object.tags?.length) res.setHeader(TAGS_HEADER.name, encodeWireHeader(TAGS_HEADER, object.tags));
  if (object.headers) res.setHeader(STORED_HEADERS_HEADER.name, encodeWireHeader(STORED_HEADERS_HEADER, object.headers));
  if (object.sse) res.setHeader(SSE_ANSWER_HEADER, JSON.stringify(object.sse));
}

/** The encryption a request asks (the gateway's checked SSE headers). */
const sseOf = (req: http.IncomingMessage) => readSseRequest(req.headers[SSE_REQUEST_HEADER]);
/**
 * `read` remembering its last text and answer: a gateway sends the same x-strata-bucket text on every
 * request to a bucket, whose schema read had cost ~2 % of a small PUT's event loop. Another text is read
 * anew (a refused one throws each time); the answer is shared between requests, and only read.
 */
export function lastTextRemembered<T>(read: (raw: string | undefined) => T): (raw: string | undefined) => T {
  let last: { raw: string; value: T } | undefined;
  return (raw) => {
    if (raw !== undefined && last?.raw === raw) return last.value;
    const value = read(raw);
    if (raw !== undefined) last = { raw, value };
    return value;
  };
}

const readResolvedBucket = lastTextRemembered((raw) => readWireHeader(BUCKET_HEADER, raw));
/** The bucket as the gateway resolved and authorised it for this request (x-strata-bucket), if it sent one. */
const resolvedBucketOf = (req: http.IncomingMessage) => readResolvedBucket(header(req, BUCKET_HEADER.name));
const resolvedSourceBucketOf = (req: http.IncomingMessage) => readWireHeader(SOURCE_BUCKET_HEADER, header(req, SOURCE_BUCKET_HEADER.name));

/** Route of the object handlers below, relative to the internal API's mount point (/internal): the http metrics' route label. */
export const OBJECT_ROUTE = '/objects/:bucket/:key';

/** The object an object request names, and its query. */
export interface ObjectTarget {
  bucket: string;
  key: string;
  query: URLSearchParams;
}

/** PUT, GET and HEAD of one object (`/internal/objects/{bucket}/{key}`): the hot path, served on Node's own request and response (app.ts). */
function objectHandlers(objects: ObjectService) {
  const put = async (req: http.IncomingMessage, res: http.ServerResponse, { bucket, key }: ObjectTarget) => {
    const result = await objects.put({
      bucket,
      key,
      owner: header(req, 'x-strata-owner') || undefined,
      anonymous: readWireHeader(ANONYMOUS_WRITE_HEADER, header(req, ANONYMOUS_WRITE_HEADER.name)) === true,
      body: requestBody(req),
      contentLength: contentLength(req),
      contentType: header(req, 'content-type'),
      userMetadata: readWireHeader(USER_METADATA_HEADER, header(req, USER_METADATA_HEADER.name)),
      tags: readWireHeader(TAGS_HEADER, header(req, TAGS_HEADER.name)),
      ...bodyHeaders(req),
      contentMd5: contentMd5(req),
      instantMd5: readInstantMd5(header(req, 'x-strata-instant-md5')),
      conditions: readWriteConditions(req),
      sse: sseOf(req),
      resolvedBucket: resolvedBucketOf(req),
    });
    // An instant hit did not read the body: close the connection rather than drain bytes nobody needs.
    if (result.instant && !req.complete) res.setHeader('connection', 'close');
    sendJson(res, result);
  };

  const read = async (req: http.IncomingMessage, res: http.ServerResponse, { bucket, key, query }: ObjectTarget, withBody: boolean) => {
    const { object, backend } = await objects.head(bucket, key, resolvedBucketOf(req));
    if (query.has('direct-url')) {
      // Encrypted bytes are only served decrypted, through the gateway.
      if (!backend.directUrl || object.encryption)
        throw Object.assign(new S3Error('NotImplemented', 'this backend cannot serve objects directly'), { status: 404 });
      const expires = Math.min(Math.max(Number(query.get('expires') ?? 900) || 900, 1), 7 * 24 * 3600);
      sendJson(res, { url: await backend.directUrl(object.locator, expires, { contentType: object.contentType, headers: object.headers }) });
      return;
    }
    // An SSE-C object needs its key on every read (HEAD too); a wrong one is refused before anything is answered.
    const dataKey = await objects.encryption.open(object.encryption, sseOf(req)?.customerKey);
    objectHeaders(res, object);
    // Decided from the metadata alone: a 304 or 412 never opens the blob.
    if (notModified(object, readConditions(req))) {
      res.statusCode = 304;
      res.end();
      return;
    }
    // One part of the object (the gateway refuses partNumber with a Range), or the Range asked for.
    const partNumber = query.has('partNumber') ? readPartNumber(query.get('partNumber')) : undefined;
    const range = partNumber !== undefined ? partRange(partNumber, object) : parseRange(header(req, 'range'), object.size);
    if (partNumber !== undefined && object.partSizes) {
      res.setHeader('x-amz-mp-parts-count', String(object.partSizes.length));
      // The part's own checksum (an upload with a checksum algorithm), for readers that check the part's bytes.
      const algorithm = storedChecksum(object.headers)?.algorithm;
      const value = object.partChecksums?.[partNumber - 1];
      if (algorithm && value) res.setHeader('x-strata-part-checksum', `${algorithm} ${value}`);
    }
    if (range) {
      res.statusCode = 206;
      res.setHeader('content-range', `bytes ${range.start}-${range.end}/${object.size}`);
    }
    res.setHeader('content-length', String(range ? range.end - range.start + 1 : object.size));
    if (!withBody) {
      res.end();
      return;
    }
    const stream = await objects.read(object, backend, range, dataKey);
    const length = range ? range.end - range.start + 1 : object.size;
    if (length <= SMALL_BODY) {
      // Small objects (the common case): read whole (bounded), then headers and body in one write.
      let body: Buffer;
      try {
        body = await readAll(stream);
      } catch {
        res.destroy();
        return;
      }
      res.end(body);
      return;
    }
    res.on('close', () => stream.destroy());
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  };
  return {
    PUT: put,
    GET: (req: http.IncomingMessage, res: http.ServerResponse, target: ObjectTarget) => read(req, res, target, true),
    HEAD: (req: http.IncomingMessage, res: http.ServerResponse, target: ObjectTarget) => read(req, res, target, false),
  };
}

const OBJECT_PATH = /^\/internal\/objects\/([^/?#]+)\/([^/?#]+)(?:\?|$)/;

/**
 * The route of the object handlers: for `/internal/objects/{bucket}/{key}` by PUT, GET or HEAD, the
 * handler that answers it; undefined for any other request (the Express routes below). Bucket and key
 * escapes that are not UTF-8 are InvalidArgument (400), raised when the handler runs.
 */
export function objectRoute(objects: ObjectService): (req: http.IncomingMessage) => ((res: http.ServerResponse) => Promise<void>) | undefined {
  const handlers = objectHandlers(objects);
  return (req) => {
    if (req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'PUT') return undefined;
    const match = OBJECT_PATH.exec(req.url ?? '');
    if (!match) return undefined;
    const handler = handlers[req.method];
    return async (res) => handler(req, res, objectTarget(match));
  };
}

function objectTarget(match: RegExpExecArray): ObjectTarget {
  const url = match.input;
  const q = url.indexOf('?');
  try {
    return { bucket: decodeURIComponent(match[1]!), key: decodeURIComponent(match[2]!), query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)) };
  } catch {
    throw new S3Error('InvalidArgument', 'Failed to decode param');
  }
}

/** The data plane's internal API (hack/adr/0001-object-store-internal-api.md). */
export function dataPlaneRoutes(deps: RouteDeps): Router {
  const { objects, multipart } = deps;
  const router = express.Router();
  const json = express.json({ limit: '2mb' });

  router.post('/objects/:bucket/:key/copy', json, async (req, res) => {
    res.json(
      await objects.copy({
        ...readCopyObjectBody(req.body),
        bucket: p(req, 'bucket'),
        key: p(req, 'key'),
        sse: sseOf(req),
        resolvedBucket: resolvedBucketOf(req),
        resolvedSourceBucket: resolvedSourceBucketOf(req),
      }),
    );
  });

  router.post('/multipart/:bucket/:key', json, async (req, res) => {
    const body = readCreateMultipartBody(req.body);
    const { uploadId, sse } = await multipart.initiate(p(req, 'bucket'), p(req, 'key'), { ...body, sse: sseOf(req) }, resolvedBucketOf(req));
    res.json({ uploadId, ...(body.checksum ? { checksum: body.checksum } : {}), ...(sse ? { sse } : {}) });
  });
  router.put('/multipart/:bucket/:key/:uploadId/parts/:n', async (req, res) => {
    res.json(
      await multipart.uploadPart(p(req, 'bucket'), p(req, 'key'), p(req, 'uploadId'), readPartNumber(p(req, 'n')), requestBody(req), {
        contentLength: contentLength(req),
        contentMd5: contentMd5(req),
        checksumAlgorithm: req.header('x-strata-checksum-algorithm'),
        ...bodyHeaders(req),
        sse: sseOf(req),
        resolvedBucket: resolvedBucketOf(req),
      }),
    );
  });
  router.put('/multipart/:bucket/:key/:uploadId/parts/:n/copy', json, async (req, res) => {
    const { sourceBucket, sourceKey, range, conditions } = readPartCopyBody(req.body);
    res.json(
      await multipart.uploadPartCopy(p(req, 'bucket'), p(req, 'key'), p(req, 'uploadId'), readPartNumber(p(req, 'n')), {
        bucket: sourceBucket,
        key: sourceKey,
        range,
        conditions,
        sse: sseOf(req),
        resolvedBucket: resolvedBucketOf(req),
        resolvedSourceBucket: resolvedSourceBucketOf(req),
      }),
    );
  });
  router.get('/multipart/:bucket/:key/:uploadId/parts', async (req, res) => {
    res.json(
      await multipart.listParts(
        p(req, 'bucket'),
        p(req, 'key'),
        p(req, 'uploadId'),
        {
          maxParts: readPageSize(q(req, 'maxParts'), 'max-parts'),
          partNumberMarker: readWholeNumber(q(req, 'partNumberMarker'), 'part-number-marker', 0),
        },
        resolvedBucketOf(req),
      ),
    );
  });
  router.post('/multipart/:bucket/:key/:uploadId/complete', json, async (req, res) => {
    const { parts, conditions, checksum, anonymous } = readCompleteMultipartBody(req.body);
    res.json(
      await multipart.complete(
        p(req, 'bucket'),
        p(req, 'key'),
        p(req, 'uploadId'),
        parts,
        { conditions, expectedChecksum: checksum, anonymous },
        resolvedBucketOf(req),
      ),
    );
  });
  router.delete('/multipart/:bucket/:key/:uploadId', async (req, res) => {
    await multipart.abort(p(req, 'bucket'), p(req, 'key'), p(req, 'uploadId'), resolvedBucketOf(req));
    res.status(204).end();
  });
  router.get('/multipart/:bucket', async (req, res) => {
    res.json(
      await multipart.listUploads(
        p(req, 'bucket'),
        {
          prefix: q(req, 'prefix'),
          delimiter: q(req, 'delimiter'),
          keyMarker: q(req, 'keyMarker'),
          uploadIdMarker: q(req, 'uploadIdMarker'),
          maxUploads: readPageSize(q(req, 'maxUploads'), 'max-uploads'),
        },
        resolvedBucketOf(req),
      ),
    );
  });

  // DeleteBucket ends the deleted bucket's uploads (the control plane, once the bucket is gone).
  router.delete('/bucket-uploads/:bucketId', async (req, res) => {
    const bucketId = Number(p(req, 'bucketId'));
    if (!Number.isSafeInteger(bucketId)) throw new S3Error('InvalidArgument', 'bucketId must be an integer');
    res.json({ aborted: await multipart.abortAllOf(bucketId) });
  });

  // A lifecycle rule's AbortIncompleteMultipartUpload (the control plane's daily job).
  router.post('/multipart-expiry/:bucket', json, async (req, res) => {
    const { prefix, initiatedNoLaterThan } = readMultipartExpiryBody(req.body);
    res.json({ aborted: await multipart.abortInitiatedBefore(p(req, 'bucket'), prefix, initiatedNoLaterThan, resolvedBucketOf(req)) });
  });

  // The control plane writes events too (recycle, restore, purge, buckets) but has no relay of its own.
  router.post('/outbox/kick', (_req, res) => {
    deps.kickOutbox();
    res.status(204).end();
  });

  router.post('/blobs/gc', json, async (req, res) => {
    res.json({ freed: await deps.collector.collect(readBlobCollectionBody(req.body).blobIds) });
  });

  return router;
}
