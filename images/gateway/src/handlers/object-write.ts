import {
  assertObjectKey,
  isChecksumAlgorithm,
  mergeStoredHeaders,
  readConditions,
  readContentMd5,
  readInstantMd5,
  readWriteConditions,
  S3Error,
  storedChecksum,
  unquoteEtag,
  type BucketInfo,
  type ObjectConditions,
} from '../../../object-model/src/index.js';
import { state, type Caller } from '../context.js';
import { aclContext, objectAclHeaders, objectAllows, writerOf } from '../middleware/access-policy.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { discard, header, objectBody, objectTagging, putObjectLength, standardHeaders, uploadHeaders, userMetadata, websiteRedirect } from '../s3/request.js';
import { checksumXml } from '../s3/checksums.js';
import { setSseHeaders, sseRequestOf } from '../s3/encryption.js';
import { setExpiration } from '../s3/expiration.js';
import { quoted, sendData, sendXml, sendStatus } from '../s3/render.js';

/**
 * PutObject, streamed to the data plane. With `x-service-md5` it is an instant-upload attempt: on a
 * hit the data plane answers before reading the body, the rest of the client's body is discarded,
 * and the answer is JSON `{"data":{"instant":true,...}}`; on a miss the upload completes normally and
 * the answer is JSON `{"data":{"instant":false,"etag":...}}` (ETag header as well, for S3 clients).
 */
export const putObject: S3Handler = async (s3) => {
  const { req, res, bucket, key, deps } = s3;
  // Undefined: an anonymous write, which the bucket's ACL must grant to AllUsers.
  const caller = state(res).caller;
  // x-service-md5: the client's claim of the body's MD5 (hex) for an instant upload. Never an anonymous
  // one: it would link the bucket owner's stored bytes to a claim of their MD5 alone.
  const instant = caller ? readInstantMd5(header(req, 'x-service-md5')) : undefined;
  let body;
  try {
    const length = putObjectLength(req, res);
    const md5 = readContentMd5(req.headers['content-md5']);
    const meta = userMetadata(req);
    const tags = objectTagging(req);
    const bucketInfo = await deps.buckets.permitted(bucket, caller, 'WRITE');
    const writer = writerOf(bucketInfo, caller?.username);
    const acl = await objectAclHeaders(req, bucketInfo, writer, aclContext(deps));
    const upload = objectBody(req, res);
    body = upload.body;
    const stored = uploadHeaders(req, upload);
    const result = await deps.objects.putObject(
      bucket,
      key,
      {
        contentLength: length,
        contentType: header(req, 'content-type'),
        owner: writer,
        anonymous: !caller,
        userMetadata: meta,
        tags,
        ...stored,
        ...(acl ? { headers: mergeStoredHeaders(stored.headers, acl) } : {}),
        contentMd5: md5,
        instantMd5: instant,
        ...readWriteConditions(req),
        sse: sseRequestOf('PutObject', req.headers),
        bucketRecord: bucketInfo,
      },
      body,
      state(res).clientGone,
    );
    res.setHeader('ETag', quoted(result.object.etag));
    setSseHeaders(res, result.object.sse);
    setExpiration(res, bucketInfo.lifecycle, { key, size: result.object.size, lastModified: result.object.lastModified, tags });
    if (upload.checksum?.value) {
      res.setHeader(upload.checksum.checksum.header, upload.checksum.value);
      res.setHeader('x-amz-checksum-type', 'FULL_OBJECT');
    }
    if (result.instant) discard(body);
    if (instant) sendData(res, { instant: result.instant, bucket, key, etag: result.object.etag, size: result.object.size });
    else sendStatus(res, 200);
  } catch (err) {
    discard(body ?? req);
    throw err;
  }
};

/** `x-amz-copy-source: /bucket/key` (URL-encoded, optional ?versionId=null) → bucket and key. */
export async function copySource(s3: S3Request, caller: Caller | undefined): Promise<{ sourceBucket: string; sourceKey: string; sourceRecord: BucketInfo }> {
  const raw = header(s3.req, 'x-amz-copy-source');
  if (!raw) throw new S3Error('InvalidArgument', 'x-amz-copy-source is required.');
  const [pathPart, queryPart] = raw.split('?');
  if (queryPart && !/^versionId=(null)?$/.test(queryPart)) throw new S3Error('NotImplemented', 'Strata does not keep object versions.');
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathPart);
  } catch {
    throw new S3Error('InvalidArgument', 'x-amz-copy-source is not properly URL-encoded.');
  }
  const trimmed = decoded.replace(/^\//, '');
  const slash = trimmed.indexOf('/');
  if (slash <= 0 || slash === trimmed.length - 1)
    throw new S3Error('InvalidArgument', 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey', { ArgumentName: 'x-amz-copy-source' });
  const sourceBucket = trimmed.slice(0, slash);
  const sourceKey = trimmed.slice(slash + 1);
  assertObjectKey(sourceKey);
  // The source is read: its bucket's owner may, others (anonymous callers too) where the source object's ACL grants them READ.
  const { deps } = s3;
  const source = await deps.buckets.existing(sourceBucket);
  if (caller === undefined || source.owner !== caller.username) {
    const meta = await deps.objects.headObject(sourceBucket, sourceKey, source).catch((err: unknown) => {
      throw err instanceof S3Error && err.code === 'NoSuchKey' ? new S3Error('AccessDenied') : err;
    });
    if (!objectAllows(source, meta.headers, caller?.username, 'READ', deps.buckets.platformBlocksPublic)) throw new S3Error('AccessDenied');
  }
  return { sourceBucket, sourceKey, sourceRecord: source };
}

/** `x-amz-copy-source-if-*` of CopyObject and UploadPartCopy (checked against the source by the data plane). */
export function copySourceConditions(req: S3Request['req']): ObjectConditions | undefined {
  return readConditions(req, 'x-amz-copy-source-');
}

/**
 * CopyObject (same backend: the blob is shared, not copied). Anonymous too, as S3: WRITE on the destination
 * bucket and READ on the source object, both granted to AllUsers; the copy is then the bucket owner's (ADR 0013).
 */
export const copyObject: S3Handler = async (s3) => {
  const { req, res, bucket, key, deps } = s3;
  const caller = state(res).caller;
  discard(req);
  const bucketInfo = await deps.buckets.permitted(bucket, caller, 'WRITE');
  const writer = writerOf(bucketInfo, caller?.username);
  // A copy never takes its source's ACL: it has the one its request names (private by default), as S3.
  const acl = await objectAclHeaders(req, bucketInfo, writer, aclContext(deps));
  const { sourceBucket, sourceKey, sourceRecord } = await copySource(s3, caller);
  const directive = (header(req, 'x-amz-metadata-directive') ?? 'COPY').toUpperCase();
  if (directive !== 'COPY' && directive !== 'REPLACE')
    throw new S3Error('InvalidArgument', 'Unknown metadata directive.', { ArgumentName: 'x-amz-metadata-directive' });
  const taggingDirective = (header(req, 'x-amz-tagging-directive') ?? 'COPY').toUpperCase();
  if (taggingDirective !== 'COPY' && taggingDirective !== 'REPLACE')
    throw new S3Error('InvalidArgument', 'Unknown tagging directive.', { ArgumentName: 'x-amz-tagging-directive' });
  // As S3: with COPY the source's tags go with the copy, and an x-amz-tagging header is ignored.
  const tags = taggingDirective === 'REPLACE' ? (objectTagging(req) ?? []) : undefined;
  // A website redirect is never copied from the source (as S3): with either directive it is the request's;
  // with REPLACE so are the other stored headers. Whether a copy onto itself changes anything (a new
  // redirect, new metadata, new encryption) the object layer judges (checkCopyChangesObject).
  const headers = mergeStoredHeaders(directive === 'REPLACE' ? standardHeaders(req) : websiteRedirect(req), acl);
  // The copy's checksum of this algorithm (computed from the bytes when the source has another one).
  const checksumAlgorithm = header(req, 'x-amz-checksum-algorithm')?.toUpperCase();
  if (checksumAlgorithm !== undefined && !isChecksumAlgorithm(checksumAlgorithm)) {
    throw new S3Error(
      'InvalidRequest',
      'Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]',
    );
  }
  const conditions = copySourceConditions(req);
  // As PutObject: a copy may require what it replaces to be (If-Match) or not to be (If-None-Match: *).
  const destinationConditions = readWriteConditions(req);
  const meta = await deps.objects.copyObject(bucket, key, {
    owner: writer,
    ...(caller ? {} : { anonymous: true }),
    sourceBucket,
    sourceKey,
    metadataDirective: directive,
    ...(directive === 'REPLACE' ? { contentType: header(req, 'content-type'), userMetadata: userMetadata(req) } : {}),
    ...(headers ? { headers } : {}),
    taggingDirective,
    ...(tags ? { tags } : {}),
    ...(checksumAlgorithm ? { checksumAlgorithm } : {}),
    ...(conditions ? { conditions } : {}),
    ...(destinationConditions ? { destinationConditions } : {}),
    sse: sseRequestOf('CopyObject', req.headers),
    bucketRecord: bucketInfo,
    sourceBucketRecord: sourceRecord,
  });
  setSseHeaders(res, meta.sse);
  setExpiration(res, bucketInfo.lifecycle, { key, size: meta.size, lastModified: meta.lastModified, tags: meta.tags });
  const checksum = storedChecksum(meta.headers);
  sendXml(res, 'CopyObjectResult', {
    LastModified: new Date(meta.lastModified).toISOString(),
    ETag: quoted(unquoteEtag(meta.etag)),
    ...(checksum ? checksumXml(checksum) : {}),
  });
};
