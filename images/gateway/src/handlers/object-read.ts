import type http from 'node:http';
import { pipeline } from 'node:stream';
import type { Request, Response } from 'express';
import { assertObjectKey, S3Error, withoutChecksum, type LifecycleRule, type StoredHeaders, type Tag } from '../../../object-model/src/index.js';
import { presignUrl } from '../auth/sigv4.js';
import type { BucketInfo } from '../clients/control-plane.js';
import { callerOf, state } from '../context.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { setExpiration } from '../s3/expiration.js';
import { header, partNumberOf, unquote } from '../s3/request.js';
import { originOf } from './presign.js';

/** response-* query parameters that override answer headers (S3 GetObject). */
const OVERRIDES: Record<string, string> = {
  'response-content-type': 'Content-Type',
  'response-content-language': 'Content-Language',
  'response-expires': 'Expires',
  'response-cache-control': 'Cache-Control',
  'response-content-disposition': 'Content-Disposition',
  'response-content-encoding': 'Content-Encoding',
};

function etagMatches(list: string, etag: string): boolean {
  return list.split(',').some((t) => {
    const v = t.trim();
    return v === '*' || unquote(v) === etag;
  });
}

/**
 * S3's precedence for conditional reads: If-Match / If-Unmodified-Since fail → 412;
 * If-None-Match / If-Modified-Since hold → 304. Returns the status to answer, or undefined to serve.
 */
export function conditionalStatus(req: Request, etag: string, lastModified: Date): 304 | 412 | undefined {
  const ifMatch = header(req, 'if-match');
  const ifNoneMatch = header(req, 'if-none-match');
  const ifModifiedSince = header(req, 'if-modified-since');
  const ifUnmodifiedSince = header(req, 'if-unmodified-since');
  const seconds = Math.floor(lastModified.getTime() / 1000);
  if (ifMatch !== undefined) {
    if (!etagMatches(ifMatch, etag)) return 412;
  } else if (ifUnmodifiedSince !== undefined) {
    const t = Date.parse(ifUnmodifiedSince);
    if (!Number.isNaN(t) && seconds > Math.floor(t / 1000)) return 412;
  }
  if (ifNoneMatch !== undefined) {
    if (etagMatches(ifNoneMatch, etag)) return 304;
  } else if (ifModifiedSince !== undefined) {
    const t = Date.parse(ifModifiedSince);
    if (!Number.isNaN(t) && seconds <= Math.floor(t / 1000)) return 304;
  }
  return undefined;
}

/** The object's tags from the data plane's x-strata-tags (JSON); undefined when it has none. */
function objectTags(h: http.IncomingHttpHeaders): Tag[] | undefined {
  const raw = h['x-strata-tags'];
  if (typeof raw !== 'string' || !raw) return undefined;
  try {
    return JSON.parse(raw) as Tag[];
  } catch {
    return undefined; // informative, as the metadata: a malformed header must not fail the read
  }
}

/** The object's stored headers from the data plane's x-strata-headers (JSON); undefined when it has none. */
function storedHeaders(h: http.IncomingHttpHeaders): StoredHeaders | undefined {
  const raw = h['x-strata-headers'];
  if (typeof raw !== 'string' || !raw) return undefined;
  try {
    return JSON.parse(raw) as StoredHeaders;
  } catch {
    return undefined; // as the metadata: a malformed header must not fail the read
  }
}

/**
 * Copy the data plane's object headers onto the answer: user metadata as x-amz-meta-*, the stored
 * standard headers (Cache-Control, ...), the checksum when the reader asked for it and gets the whole
 * object (a range's bytes do not have the object's checksum) or a part that has its own, the tags' count
 * as x-amz-tagging-count.
 */
function copyObjectHeaders(h: http.IncomingHttpHeaders, res: Response, query: URLSearchParams, tags: Tag[] | undefined, withChecksum: boolean): void {
  for (const name of ['content-length', 'content-range', 'etag', 'last-modified', 'content-type', 'x-amz-mp-parts-count'] as const) {
    const v = h[name];
    if (v !== undefined) res.setHeader(name, v);
  }
  res.setHeader('Accept-Ranges', 'bytes');
  const meta = h['x-strata-meta'];
  if (typeof meta === 'string' && meta) {
    try {
      for (const [k, v] of Object.entries(JSON.parse(meta) as Record<string, string>)) res.setHeader(`x-amz-meta-${k}`, v);
    } catch {
      // metadata is informative: a malformed header must not fail the read
    }
  }
  const stored = storedHeaders(h);
  const answered = withChecksum && h['content-range'] === undefined ? stored : withoutChecksum(stored);
  for (const [name, value] of Object.entries(answered ?? {})) res.setHeader(name, value);
  // One part of a multipart object (partNumber) has its own checksum, as S3 answers it.
  const [partAlgorithm, partChecksum] = withChecksum ? String(h['x-strata-part-checksum'] ?? '').split(' ') : [];
  if (partAlgorithm && partChecksum) res.setHeader(`x-amz-checksum-${partAlgorithm.toLowerCase()}`, partChecksum);
  if (tags?.length) res.setHeader('x-amz-tagging-count', String(tags.length));
  for (const [param, headerName] of Object.entries(OVERRIDES)) {
    const v = query.get(param);
    if (v !== null) res.setHeader(headerName, v);
  }
}

/**
 * Status and headers of the answer from the data plane's headers: 304 / 412 for conditional reads
 * (true: the answer is complete), else the object's headers (false: the body follows, unless HEAD).
 */
function answerHeaders(s3: S3Request, status: number, h: http.IncomingHttpHeaders, rules: readonly LifecycleRule[] | undefined): boolean {
  const { req, res, query } = s3;
  const etag = unquote(String(h.etag ?? ''));
  const lastModified = new Date(String(h['last-modified'] ?? 0));
  const conditional = conditionalStatus(req, etag, lastModified);
  if (conditional === 412) throw new S3Error('PreconditionFailed', undefined, { Condition: header(req, 'if-match') !== undefined ? 'If-Match' : 'If-Unmodified-Since' });
  if (conditional === 304) {
    res.status(304);
    res.setHeader('ETag', `"${etag}"`);
    res.setHeader('Last-Modified', lastModified.toUTCString());
    res.end();
    return true;
  }
  res.status(status === 206 ? 206 : 200);
  const tags = objectTags(h);
  copyObjectHeaders(h, res, query, tags, header(req, 'x-amz-checksum-mode')?.toUpperCase() === 'ENABLED');
  if (rules?.length) {
    // The whole object's size: a range answer names it after the slash of Content-Range.
    const size = Number(String(h['content-range'] ?? '').split('/')[1] ?? h['content-length']);
    setExpiration(res, rules, { key: s3.key, size, lastModified, tags });
  }
  return false;
}

async function readObject(s3: S3Request, method: 'GET' | 'HEAD', bucketInfo: BucketInfo, partNumber: number | undefined): Promise<void> {
  const rules = bucketInfo.lifecycle;
  const { req, res, bucket, key, deps } = s3;
  const st = state(res);
  const range = header(req, 'range');
  // Whole-object reads of small objects may be answered from the gateway's copy of an earlier answer.
  const answers = range === undefined && partNumber === undefined ? deps.objectAnswers : undefined;
  const version = answers ? await answers.version(bucket, key) : undefined;
  const cached = version !== undefined ? answers!.get(bucket, key, version) : undefined;
  if (cached) {
    if (!answerHeaders(s3, 200, cached.headers, rules)) res.end(method === 'GET' ? cached.body : undefined);
    return;
  }
  const upstream = await deps.dataPlane.getObject(method, bucket, key, { range, partNumber }, st.clientGone);
  let answered: boolean;
  try {
    answered = answerHeaders(s3, upstream.statusCode ?? 200, upstream.headers, rules);
  } catch (err) {
    upstream.destroy();
    throw err;
  }
  if (answered) {
    upstream.destroy();
    return;
  }
  if (method === 'HEAD') {
    upstream.resume();
    res.end();
    return;
  }
  const length = Number(upstream.headers['content-length']);
  if (length <= SMALL_BODY) {
    // Small objects (the common case): read whole (bounded), then headers and body in one write.
    // A body cut short upstream cuts this answer too (as the piped path does), not an error with its headers.
    const body = await readSmall(upstream).catch(() => undefined);
    if (!body) {
      res.destroy();
      return;
    }
    if (version !== undefined && upstream.statusCode === 200) answers!.set(bucket, key, version, { headers: upstream.headers, body });
    res.end(body);
    return;
  }
  await new Promise<void>((resolve, reject) => pipeline(upstream, res, (err) => (err && !res.writableFinished ? reject(err) : resolve())));
}

/**
 * GetObject/HeadObject `partNumber`: one part of a multipart object (an object uploaded whole is its
 * part 1); never together with a Range.
 */
function requestedPart({ req, query }: S3Request): number | undefined {
  if (!query.has('partNumber')) return undefined;
  const partNumber = partNumberOf(query);
  if (header(req, 'range') !== undefined) throw new S3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query parameter');
  return partNumber;
}

/** Bodies up to this size are answered with one res.end(buffer) instead of a piped stream (and may be kept: ObjectAnswerCache). */
export const SMALL_BODY = 64 * 1024;

function readSmall(upstream: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    upstream.on('data', (c: Buffer) => chunks.push(c));
    upstream.once('end', () => (upstream.complete ? resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)) : reject(new Error('the data plane closed the body early'))));
    upstream.once('error', reject);
    upstream.once('close', () => {
      if (!upstream.complete) reject(new Error('the data plane closed the body early'));
    });
  });
}

/**
 * GetObject. SigV4 and presigned callers get the bytes; Bearer callers are redirected (302) to a
 * short-lived presigned URL (the backend's own URL when it can serve the object), unless they ask
 * for `?proxy=true`.
 */
export const getObject: S3Handler = async (s3) => {
  const { res, bucket, key, query, deps } = s3;
  const caller = callerOf(res);
  assertObjectKey(key);
  const partNumber = requestedPart(s3);
  const b = await deps.buckets.owned(bucket, caller);
  if (caller.via === 'bearer' && query.get('proxy') !== 'true') {
    let location: string | undefined;
    // (A backend's own URL knows nothing of Strata's part boundaries.)
    if (b.backend?.kind !== 'fs' && partNumber === undefined) location = await deps.dataPlane.directUrl(bucket, key, deps.redirectSeconds);
    if (!location) {
      await deps.controlPlane.headObject(bucket, key);
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
    res.status(302).end();
    return;
  }
  await readObject(s3, 'GET', b, partNumber);
};

export const headObject: S3Handler = async (s3) => {
  assertObjectKey(s3.key);
  const partNumber = requestedPart(s3);
  await readObject(s3, 'HEAD', await s3.deps.buckets.owned(s3.bucket, callerOf(s3.res)), partNumber);
};
