import { pipeline } from 'node:stream';
import type http from 'node:http';
import {
  readConditions,
  readPartNumber,
  S3Error,
  sseResponseHeaders,
  withoutAcl,
  withoutChecksum,
  type BucketInfo,
  type LifecycleRule,
  type ObjectMeta,
  type ObjectRead,
} from '../../../object-model/src/index.js';
import { presignUrl } from '../auth/sigv4.js';
import { state } from '../context.js';
import { aclsEnabled, bucketAllows, objectAllows } from '../middleware/access-policy.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { setExpiration } from '../s3/expiration.js';
import { header, metadataHeaderValue } from '../s3/request.js';
import { originOf } from './presign.js';
import { sendStatus } from '../s3/render.js';
import { sseRequestOf } from '../s3/encryption.js';
import { readWhole } from '../s3/whole-body.js';

/** response-* query parameters that override answer headers (S3 GetObject). */
const OVERRIDES: Record<string, string> = {
  'response-content-type': 'Content-Type',
  'response-content-language': 'Content-Language',
  'response-expires': 'Expires',
  'response-cache-control': 'Cache-Control',
  'response-content-disposition': 'Content-Disposition',
  'response-content-encoding': 'Content-Encoding',
};

/**
 * A response-* override as a header value: a header holds bytes, and Node writes only tab and characters
 * U+0020-U+00FF but DEL (one byte each; it refuses the others, which was a 500). The others are sent
 * percent-encoded as UTF-8 (RFC 5987's encoding), so the answer is served and its bytes say what was sent.
 */
function headerSafe(value: string): string {
  return value.replace(/[^\t\u0020-\u007e\u0080-\u00ff]+/gu, (chars) => encodeURIComponent(chars));
}

/** Last-Modified of objects answered lately: a kept answer's object is answered many times (ObjectAnswerCache). */
const lastModifiedTexts = new WeakMap<ObjectMeta, string>();

function lastModifiedOf(object: ObjectMeta): string {
  let text = lastModifiedTexts.get(object);
  if (text === undefined) {
    text = new Date(object.lastModified).toUTCString();
    lastModifiedTexts.set(object, text);
  }
  return text;
}

/** 304 Not Modified: the object's ETag and Last-Modified, no body. */
function sendNotModified(res: http.ServerResponse, object: ObjectMeta): void {
  res.statusCode = 304;
  res.setHeader('ETag', `"${object.etag}"`);
  res.setHeader('Last-Modified', lastModifiedOf(object));
  res.end();
}

type HeaderList = ReadonlyArray<readonly [string, string]>;

/**
 * The headers an answer of `read` carries by the object alone: its standard headers, user metadata as
 * x-amz-meta-*, the stored headers (Cache-Control, ...), the checksum when the reader asked for it and
 * gets the whole object (a range's bytes do not have the object's checksum) or a part that has its own,
 * the tags' count as x-amz-tagging-count and its encryption.
 */
function objectHeaders(read: ObjectRead, withChecksum: boolean): HeaderList {
  const { object } = read;
  const list: Array<[string, string]> = [['Content-Length', String(read.contentLength)]];
  if (read.contentRange) list.push(['Content-Range', read.contentRange]);
  list.push(['ETag', `"${object.etag}"`], ['Last-Modified', lastModifiedOf(object)], ['Content-Type', object.contentType]);
  if (read.partsCount !== undefined) list.push(['x-amz-mp-parts-count', String(read.partsCount)]);
  list.push(['Accept-Ranges', 'bytes']);
  for (const [k, v] of Object.entries(object.userMetadata)) list.push([`x-amz-meta-${k}`, metadataHeaderValue(v)]);
  const answered = withoutAcl(withChecksum && read.contentRange === undefined ? object.headers : withoutChecksum(object.headers));
  for (const [name, value] of Object.entries(answered ?? {})) list.push([name, value]);
  // One part of a multipart object (partNumber) has its own checksum, as S3 answers it.
  if (withChecksum && read.partChecksum) list.push([`x-amz-checksum-${read.partChecksum.algorithm.toLowerCase()}`, read.partChecksum.value]);
  if (object.tags?.length) list.push(['x-amz-tagging-count', String(object.tags.length)]);
  for (const [name, value] of Object.entries(sseResponseHeaders(object.sse))) list.push([name, value]);
  return list;
}

/** objectHeaders of reads answered lately without a checksum asked: a kept answer's read is answered many times (ObjectAnswerCache). */
const plainHeaderLists = new WeakMap<ObjectRead, HeaderList>();

function plainObjectHeaders(read: ObjectRead): HeaderList {
  let list = plainHeaderLists.get(read);
  if (list === undefined) plainHeaderLists.set(read, (list = objectHeaders(read, false)));
  return list;
}

/** The response-* overrides a query asks for, as headers (none for most: read once per query, which the router keeps). */
const overridesByQuery = new WeakMap<URLSearchParams, HeaderList>();

function overridesOf(query: URLSearchParams): HeaderList {
  let list = overridesByQuery.get(query);
  if (list === undefined) {
    const found: Array<[string, string]> = [];
    for (const [param, headerName] of Object.entries(OVERRIDES)) {
      const v = query.get(param);
      if (v !== null) found.push([headerName, headerSafe(v)]);
    }
    overridesByQuery.set(query, (list = found));
  }
  return list;
}

/**
 * Status and headers of a read that serves the object: the object's (objectHeaders), then the response-*
 * overrides and the lifecycle's x-amz-expiration.
 */
function sendObjectHeaders(s3: S3Request, read: ObjectRead, rules: readonly LifecycleRule[] | undefined): void {
  const { req, res, query } = s3;
  const { object } = read;
  res.statusCode = read.status === 206 ? 206 : 200;
  const withChecksum = header(req, 'x-amz-checksum-mode')?.toUpperCase() === 'ENABLED';
  for (const [name, value] of withChecksum ? objectHeaders(read, true) : plainObjectHeaders(read)) res.setHeader(name, value);
  for (const [name, value] of overridesOf(query)) res.setHeader(name, value);
  if (rules?.length) setExpiration(res, rules, { key: s3.key, size: object.size, lastModified: new Date(object.lastModified), tags: object.tags });
}

async function readObject(s3: S3Request, method: 'GET' | 'HEAD', bucketInfo: BucketInfo, partNumber: number | undefined): Promise<void> {
  const { req, res, bucket, key, deps } = s3;
  const range = header(req, 'range');
  const conditions = readConditions(req);
  const sse = sseRequestOf(method === 'GET' ? 'GetObject' : 'HeadObject', req.headers);
  // The object layer decides the conditions from the metadata: a 304 or 412 opens no body.
  const read = await deps.objects.getObject(bucket, key, { method, range, partNumber, conditions, sse, bucketRecord: bucketInfo }, state(res).clientGone);
  const { body } = read;
  if (read.status === 304) return sendNotModified(res, read.object);
  try {
    sendObjectHeaders(s3, read, bucketInfo.lifecycle);
  } catch (err) {
    body?.destroy();
    throw err;
  }
  // Small objects (the common case): headers and body in one write.
  if (read.bytes) return void res.end(read.bytes);
  if (!body) return void res.end();
  if (read.contentLength <= SMALL_BODY) {
    // Read whole (bounded). A body cut short upstream cuts this answer too (as the piped path does), not an error with its headers.
    const bytes = await readWhole(body).catch(() => undefined);
    if (!bytes) return void res.destroy();
    res.end(bytes);
    return;
  }
  await new Promise<void>((resolve, reject) => pipeline(body, res, (err) => (err && !res.writableFinished ? reject(err) : resolve())));
}

/**
 * GetObject/HeadObject `partNumber`: one part of a multipart object (an object uploaded whole is its
 * part 1); never together with a Range.
 */
function requestedPart({ req, query }: S3Request): number | undefined {
  if (!query.has('partNumber')) return undefined;
  // The part number's syntax here; its range is the object layer's to judge.
  const partNumber = readPartNumber(query.get('partNumber'));
  if (header(req, 'range') !== undefined) throw new S3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query parameter');
  return partNumber;
}

/** Bodies up to this size are answered with one res.end(buffer) instead of a piped stream (and may be kept: ObjectAnswerCache). */
export const SMALL_BODY = 64 * 1024;

/**
 * The bucket of an object the caller may read (GetObject, HeadObject, GetObjectAttributes): its owner may;
 * anyone else (anonymous callers included) where the object's ACL grants READ. As S3, a missing key is
 * NoSuchKey only to who may list the bucket.
 */
export async function readable(s3: S3Request): Promise<BucketInfo> {
  const { res, bucket, key, deps } = s3;
  const caller = state(res).caller?.username;
  const info = deps.buckets.existingNow(bucket) ?? (await deps.buckets.existing(bucket));
  if (caller !== undefined && caller === info.owner) return info;
  // With ACLs off only the owner reads: no lookup of the object.
  if (!aclsEnabled(info)) throw new S3Error('AccessDenied');
  const blocks = deps.buckets.platformBlocksPublic;
  const meta = await deps.objects.headObject(bucket, key, info).catch((err: unknown) => {
    if (err instanceof S3Error && err.code === 'NoSuchKey' && !bucketAllows(info, caller, 'READ', blocks)) throw new S3Error('AccessDenied');
    throw err;
  });
  if (!objectAllows(info, meta.headers, caller, 'READ', blocks)) throw new S3Error('AccessDenied');
  return info;
}

/**
 * GetObject. SigV4 and presigned callers get the bytes; Bearer callers are redirected (302) to a
 * short-lived presigned URL (the backend's own URL when it can serve the object), unless they ask
 * for `?proxy=true`.
 */
export const getObject: S3Handler = async (s3) => {
  const { res, bucket, key, query, deps } = s3;
  const caller = state(res).caller;
  const partNumber = requestedPart(s3);
  const b = await readable(s3);
  if (caller?.via === 'bearer' && query.get('proxy') !== 'true') {
    let location: string | undefined;
    // (A backend's own URL knows nothing of Strata's part boundaries.)
    if (b.backend?.kind !== 'fs' && partNumber === undefined) location = await deps.objects.directUrl(bucket, key, deps.redirectSeconds, b);
    if (!location) {
      await deps.objects.headObject(bucket, key, b);
      const cred = await deps.credentials(caller.accessKey);
      const passOn = [...query.entries()].filter(([k]) => k in OVERRIDES || k === 'partNumber');
      location = presignUrl({
        method: 'GET',
        origin: originOf(s3),
        path: `/${bucket}/${key}`,
        accessKey: cred.accessKey,
        secret: cred.secretKey,
        region: deps.region,
        expiresSeconds: deps.redirectSeconds,
        extraQuery: passOn,
      });
    }
    res.setHeader('Location', location);
    res.setHeader('Cache-Control', 'no-store');
    sendStatus(res, 302);
    return;
  }
  await readObject(s3, 'GET', b, partNumber);
};

export const headObject: S3Handler = async (s3) => {
  const partNumber = requestedPart(s3);
  await readObject(s3, 'HEAD', await readable(s3), partNumber);
};
