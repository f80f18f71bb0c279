import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import { assertObjectKey, S3Error } from '../../../object-model/src/index.js';
import { rawTarget, state } from '../context.js';
import type { GatewayDeps } from '../deps.js';
import { enforceKeyScope } from '../auth/key-scope.js';
import { safeDecode } from '../auth/sigv4.js';
import * as access from '../handlers/access-control.js';
import * as buckets from '../handlers/buckets.js';
import * as configs from '../handlers/bucket-configs.js';
import { bucketLogging } from '../handlers/bucket-logging.js';
import { deleteObject, deleteObjects } from '../handlers/delete-objects.js';
import * as list from '../handlers/list.js';
import * as multipart from '../handlers/multipart.js';
import { getObjectAttributes } from '../handlers/object-attributes.js';
import { getObject, headObject } from '../handlers/object-read.js';
import { deleteObjectTagging, getObjectTagging, putObjectTagging } from '../handlers/object-tagging.js';
import { copyObject, putObject } from '../handlers/object-write.js';
import { postObject } from '../handlers/post-object.js';
import { presign } from '../handlers/presign.js';
import { notImplemented } from '../handlers/unsupported.js';
import { checkServerSideEncryption } from './encryption.js';
import { invalidBeforeUnsupported, refuseUnsupportedProperties } from './object-properties.js';
import type { S3Handler } from './operation.js';
import { discard, header } from './request.js';

/** Bucket subresources Strata does not implement (by design: no versioning, policy, lock...); GETs of most answer as unset (unsetConfig). */
const UNSUPPORTED_BUCKET = [
  'policy',
  'object-lock',
  'website',
  'notification',
  'replication',
  'accelerate',
  'requestPayment',
  'analytics',
  'metrics',
  'inventory',
  'intelligent-tiering',
  'policyStatus',
];
const UNSUPPORTED_OBJECT = ['retention', 'legal-hold', 'torrent', 'restore', 'select'];

interface Route {
  operation: string;
  handler: S3Handler;
  /** The request carries its own proof (a browser form's signed policy): the auth middleware leaves it to the handler. */
  authenticatesItself?: true;
}

function unsupportedSubresource(query: URLSearchParams, names: string[]): Route | undefined {
  const name = names.find((n) => query.has(n));
  return name ? { operation: `Unsupported:${name}`, handler: notImplemented(`?${name}`) } : undefined;
}

/** GET of a configuration no bucket has here (policy, encryption, logging...): S3's answer for an unset one. */
function unsetConfig(query: URLSearchParams): Route | undefined {
  const name = configs.UNSET_CONFIGS.find((n) => query.has(n));
  return name ? { operation: configs.unsetConfigOperation(name), handler: configs.getUnsetConfig(name) } : undefined;
}

/** DELETE of a configuration no bucket has here (policy, website...): S3's 204 for an unset one. */
function unsetConfigDelete(query: URLSearchParams): Route | undefined {
  const name = configs.UNSET_DELETABLE_CONFIGS.find((n) => query.has(n));
  return name ? { operation: configs.unsetConfigDeleteOperation(name), handler: configs.deleteUnsetConfig } : undefined;
}

/** Pick the S3 operation from method, bucket/key presence and subresources (the S3 REST rules). */
export function routeOf(method: string, bucket: string, key: string, query: URLSearchParams, headers: http.IncomingMessage['headers']): Route {
  if (!bucket) {
    if (method === 'GET') return { operation: 'ListBuckets', handler: buckets.listBuckets };
    return { operation: 'MethodNotAllowed', handler: async () => Promise.reject(new S3Error('MethodNotAllowed')) };
  }
  if (!key) {
    switch (method) {
      case 'PUT':
        if (query.has('acl')) return { operation: 'PutBucketAcl', handler: access.putBucketAcl };
        if (query.has('ownershipControls')) return { operation: 'PutBucketOwnershipControls', handler: access.ownershipControls.put };
        if (query.has('publicAccessBlock')) return { operation: 'PutPublicAccessBlock', handler: access.publicAccessBlock.put };
        if (query.has('versioning')) return { operation: 'PutBucketVersioning', handler: notImplemented('versioning') };
        if (query.has('lifecycle')) return { operation: 'PutBucketLifecycleConfiguration', handler: configs.lifecycle.put };
        if (query.has('cors')) return { operation: 'PutBucketCors', handler: configs.cors.put };
        if (query.has('tagging')) return { operation: 'PutBucketTagging', handler: configs.tags.put };
        if (query.has('encryption')) return { operation: 'PutBucketEncryption', handler: configs.encryption.put };
        if (query.has('logging')) return { operation: 'PutBucketLogging', handler: bucketLogging.put };
        return unsupportedSubresource(query, UNSUPPORTED_BUCKET) ?? { operation: 'CreateBucket', handler: buckets.createBucket };
      case 'DELETE':
        if (query.has('lifecycle')) return { operation: 'DeleteBucketLifecycle', handler: configs.lifecycle.delete };
        if (query.has('cors')) return { operation: 'DeleteBucketCors', handler: configs.cors.delete };
        if (query.has('tagging')) return { operation: 'DeleteBucketTagging', handler: configs.tags.delete };
        if (query.has('encryption')) return { operation: 'DeleteBucketEncryption', handler: configs.encryption.delete };
        if (query.has('ownershipControls')) return { operation: 'DeleteBucketOwnershipControls', handler: access.ownershipControls.delete };
        if (query.has('publicAccessBlock')) return { operation: 'DeletePublicAccessBlock', handler: access.publicAccessBlock.delete };
        // (S3 has no DeleteBucketLogging: an empty PutBucketLogging turns it off. Never a DeleteBucket.)
        if (query.has('logging')) return { operation: 'Unsupported:logging', handler: notImplemented('DELETE ?logging') };
        return unsetConfigDelete(query) ?? unsupportedSubresource(query, UNSUPPORTED_BUCKET) ?? { operation: 'DeleteBucket', handler: buckets.deleteBucket };
      case 'HEAD':
        return { operation: 'HeadBucket', handler: buckets.headBucket };
      case 'POST':
        if (query.has('delete')) return { operation: 'DeleteObjects', handler: deleteObjects };
        if (/^multipart\/form-data\b/i.test(String(headers['content-type'] ?? '')))
          return { operation: 'PostObject', handler: postObject, authenticatesItself: true };
        return {
          operation: 'PostBucket',
          handler: async () => Promise.reject(new S3Error('PreconditionFailed', 'Bucket POST must be of the enclosure-type multipart/form-data')),
        };
      case 'GET':
        if (query.has('location')) return { operation: 'GetBucketLocation', handler: buckets.getBucketLocation };
        if (query.has('versioning')) return { operation: 'GetBucketVersioning', handler: buckets.getBucketVersioning };
        if (query.has('acl')) return { operation: 'GetBucketAcl', handler: access.getBucketAcl };
        if (query.has('ownershipControls')) return { operation: 'GetBucketOwnershipControls', handler: access.ownershipControls.get };
        if (query.has('publicAccessBlock')) return { operation: 'GetPublicAccessBlock', handler: access.publicAccessBlock.get };
        if (query.has('lifecycle')) return { operation: 'GetBucketLifecycleConfiguration', handler: configs.lifecycle.get };
        if (query.has('cors')) return { operation: 'GetBucketCors', handler: configs.cors.get };
        if (query.has('tagging')) return { operation: 'GetBucketTagging', handler: configs.tags.get };
        if (query.has('encryption')) return { operation: 'GetBucketEncryption', handler: configs.encryption.get };
        if (query.has('logging')) return { operation: 'GetBucketLogging', handler: bucketLogging.get };
        if (query.has('uploads')) return { operation: 'ListMultipartUploads', handler: multipart.listMultipartUploads };
        if (query.has('versions')) return { operation: 'ListObjectVersions', handler: list.listObjectVersions };
        return (
          unsetConfig(query) ??
          unsupportedSubresource(query, UNSUPPORTED_BUCKET) ??
          (query.get('list-type') === '2'
            ? { operation: 'ListObjectsV2', handler: list.listObjectsV2 }
            : { operation: 'ListObjects', handler: list.listObjectsV1 })
        );
    }
    return { operation: 'MethodNotAllowed', handler: async () => Promise.reject(new S3Error('MethodNotAllowed')) };
  }
  switch (method) {
    case 'PUT':
      if (query.has('acl')) return { operation: 'PutObjectAcl', handler: access.putObjectAcl };
      if (query.has('tagging')) return { operation: 'PutObjectTagging', handler: putObjectTagging };
      if (query.has('uploadId') || query.has('partNumber')) {
        return headers['x-amz-copy-source']
          ? { operation: 'UploadPartCopy', handler: multipart.uploadPartCopy }
          : { operation: 'UploadPart', handler: multipart.uploadPart };
      }
      return (
        unsupportedSubresource(query, UNSUPPORTED_OBJECT) ??
        (headers['x-amz-copy-source'] ? { operation: 'CopyObject', handler: copyObject } : { operation: 'PutObject', handler: putObject })
      );
    case 'GET':
      if (query.has('acl')) return { operation: 'GetObjectAcl', handler: access.getObjectAcl };
      if (query.has('tagging')) return { operation: 'GetObjectTagging', handler: getObjectTagging };
      if (query.has('uploadId')) return { operation: 'ListParts', handler: multipart.listParts };
      if (query.has('presign')) return { operation: 'Presign', handler: presign };
      if (query.has('attributes')) return { operation: 'GetObjectAttributes', handler: getObjectAttributes };
      return unsupportedSubresource(query, UNSUPPORTED_OBJECT) ?? { operation: 'GetObject', handler: getObject };
    case 'HEAD':
      return { operation: 'HeadObject', handler: headObject };
    case 'DELETE':
      if (query.has('uploadId')) return { operation: 'AbortMultipartUpload', handler: multipart.abortMultipartUpload };
      if (query.has('tagging')) return { operation: 'DeleteObjectTagging', handler: deleteObjectTagging };
      return unsupportedSubresource(query, UNSUPPORTED_OBJECT) ?? { operation: 'DeleteObject', handler: deleteObject };
    case 'POST':
      if (query.has('uploads')) return { operation: 'CreateMultipartUpload', handler: multipart.createMultipartUpload };
      if (query.has('uploadId')) return { operation: 'CompleteMultipartUpload', handler: multipart.completeMultipartUpload };
      return unsupportedSubresource(query, UNSUPPORTED_OBJECT) ?? { operation: 'PostObject', handler: notImplemented('this POST request') };
  }
  return { operation: 'MethodNotAllowed', handler: async () => Promise.reject(new S3Error('MethodNotAllowed')) };
}

/** Split `/bucket/key...` (path-style) into the decoded bucket and key. */
export function bucketAndKey(rawPath: string): { bucket: string; key: string } {
  const path = rawPath.startsWith('/') ? rawPath.slice(1) : rawPath;
  const slash = path.indexOf('/');
  if (slash < 0) return { bucket: safeDecode(path), key: '' };
  return { bucket: safeDecode(path.slice(0, slash)), key: safeDecode(path.slice(slash + 1)) };
}

interface ResolvedRequest {
  route: Route;
  bucket: string;
  key: string;
  query: URLSearchParams;
}

/** Each request's route, found once by nameOperation and used again by s3Endpoint (on the response: no WeakMap entry per request). */
const RESOLVED = Symbol('strata.resolved-request');
type ResolvedResponse = http.ServerResponse & { [RESOLVED]?: ResolvedRequest };

/** A request's query, shared by the requests that send the same text: nothing may change it. */
class ReadOnlyQuery extends URLSearchParams {
  override append(): void {
    throw new TypeError('a request query is read only');
  }
  override delete(): void {
    throw new TypeError('a request query is read only');
  }
  override set(): void {
    throw new TypeError('a request query is read only');
  }
  override sort(): void {
    throw new TypeError('a request query is read only');
  }
}

/**
 * Queries read lately, by their text: a presigned URL fetched again reads its query once (Node's
 * URLSearchParams took ~4 µs a presigned query, more than the rest of routing). At most MAX_QUERIES.
 */
const queries = new Map<string, ReadOnlyQuery>();
const MAX_QUERIES = 4096;

/** The query of `rawQuery` (read only). */
export function queryOf(rawQuery: string): URLSearchParams {
  let query = queries.get(rawQuery);
  if (query === undefined) {
    query = new ReadOnlyQuery(rawQuery);
    if (queries.size >= MAX_QUERIES) queries.clear();
    queries.set(rawQuery, query);
  }
  return query;
}

function resolve(req: http.IncomingMessage): ResolvedRequest {
  const { path, query: rawQuery } = rawTarget(req);
  const { bucket, key } = bucketAndKey(path);
  const query = queryOf(rawQuery);
  return { route: routeOf(req.method ?? '', bucket, key, query, req.headers), bucket, key, query };
}

/** Names the operation before auth runs, so metrics and logs carry it even for refused requests. */
export function nameOperation(req: http.IncomingMessage, res: http.ServerResponse, next: Next): void {
  const r = resolve(req);
  (res as ResolvedResponse)[RESOLVED] = r;
  const st = state(res);
  st.operation = r.route.operation;
  st.bucket = r.bucket;
  st.key = r.key;
  if (r.route.authenticatesItself) state(res).authenticatesItself = true;
  next();
}

/**
 * `x-amz-expected-bucket-owner` (and `x-amz-source-expected-bucket-owner` for copies): the caller states
 * whose bucket it means to reach; a bucket's owner ID is the owner's name (as in ListBuckets). The
 * bucket's record is looked up (the cached one the handler reads too): with ACL grants a caller may reach
 * another account's bucket. Anonymous callers are held to it too (a public bucket), as S3 holds them.
 */
async function checkExpectedOwners(req: http.IncomingMessage, bucket: string, deps: GatewayDeps): Promise<void> {
  if (!bucket) return;
  const source = header(req, 'x-amz-copy-source');
  const sourceBucket = source === undefined ? undefined : safeDecode(source.split('?', 1)[0]!).replace(/^\//, '').split('/', 1)[0];
  for (const [name, target] of [
    ['x-amz-expected-bucket-owner', bucket],
    ['x-amz-source-expected-bucket-owner', sourceBucket],
  ] as const) {
    const expected = req.headers[name];
    if (expected === undefined) continue;
    // (A bucket that does not exist is left to the handler: NoSuchBucket.)
    const owner = target
      ? await deps.buckets.existing(target).then(
          (b) => b.owner,
          () => expected,
        )
      : undefined;
    if (owner === expected) continue;
    // S3's plain refusal: a message of its own would tell a stranger that the name they guessed is not the owner.
    throw new S3Error('AccessDenied');
  }
}

/** The S3 REST endpoint: every path not claimed by /login or /admin. */
export function s3Endpoint(deps: GatewayDeps) {
  return async (req: http.IncomingMessage, res: http.ServerResponse, next: Next) => {
    try {
      const { route, bucket, key, query } = (res as ResolvedResponse)[RESOLVED] ?? resolve(req);
      const st = state(res);
      st.operation = route.operation;
      // (The listing prefix matters only to a scoped key.)
      enforceKeyScope(st.caller, route.operation, bucket, key, st.caller?.scope ? query.get('prefix') : null);
      if (req.headers['x-amz-expected-bucket-owner'] !== undefined || req.headers['x-amz-source-expected-bucket-owner'] !== undefined)
        await checkExpectedOwners(req, bucket, deps);
      try {
        // Every operation on a key, reads included: a key no write accepts never reaches a lookup.
        if (key) assertObjectKey(key);
        invalidBeforeUnsupported(
          () => checkServerSideEncryption(route.operation, req.headers),
          () => refuseUnsupportedProperties(route.operation, req.headers),
        );
      } catch (err) {
        discard(req);
        throw err;
      }
      await route.handler({ req, res, bucket, key, query, deps });
    } catch (err) {
      next(err);
    }
  };
}
