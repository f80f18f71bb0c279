import {
  mergeStoredHeaders,
  readContentMd5,
  readCopySourceRange,
  readPageSize,
  readPartNumber,
  readWholeNumber,
  readWriteConditions,
  S3Error,
  storedChecksum,
  unquoteEtag,
  type BucketInfo,
  type ListPartsResult,
} from '../../../object-model/src/index.js';
import { aclContext, bucketAllows, objectAclHeaders, writerOf } from '../middleware/access-policy.js';
import { callerOf, state } from '../context.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import {
  checksumHeadersOf,
  discard,
  encoderOf,
  header,
  objectBody,
  objectLength,
  objectTagging,
  readSmallBody,
  standardHeaders,
  userMetadata,
} from '../s3/request.js';
import { checksumXml, listedPartChecksum, objectChecksumHeader } from '../s3/checksums.js';
import { setAbortDate, setExpiration } from '../s3/expiration.js';
import { customerKeyAnswer, setSseHeaders, sseRequestOf } from '../s3/encryption.js';
import { owner, quoted, sendXml, urlEncodeKey, sendStatus } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';
import { copySource, copySourceConditions } from './object-write.js';

/**
 * The bucket of an upload: its owner's, or another's whose ACL grants the caller WRITE — an anonymous caller
 * too, where it grants AllUsers WRITE (ADR 0013: CreateMultipartUpload, UploadPart and CompleteMultipartUpload
 * are writes as PutObject is).
 */
async function target(s3: S3Request): Promise<BucketInfo> {
  return s3.deps.buckets.permitted(s3.bucket, state(s3.res).caller, 'WRITE');
}

/** POST /bucket/key?uploads */
export const createMultipartUpload: S3Handler = async (s3) => {
  const { req, res, bucket, key, deps } = s3;
  discard(req);
  const tags = objectTagging(req);
  // The object's checksum (S3 since 2022): each part then carries one of this algorithm.
  const algorithm = header(req, 'x-amz-checksum-algorithm');
  const type = header(req, 'x-amz-checksum-type');
  if (type !== undefined && algorithm === undefined) throw new S3Error('InvalidRequest', 'x-amz-checksum-type needs x-amz-checksum-algorithm.');
  const bucketInfo = await target(s3);
  // Undefined: an anonymous initiation, whose upload (and object) the bucket owner owns, as an anonymous PutObject's.
  const caller = state(res).caller;
  const writer = writerOf(bucketInfo, caller?.username);
  // The ACL asked for here is kept with the upload and given to the object at completion, as S3.
  const acl = await objectAclHeaders(req, bucketInfo, writer, aclContext(deps));
  const { uploadId, checksum, sse } = await deps.objects.createMultipart(bucket, key, {
    owner: writer,
    ...(caller ? {} : { anonymous: true }),
    contentType: header(req, 'content-type'),
    userMetadata: userMetadata(req),
    ...(tags?.length ? { tags } : {}),
    headers: mergeStoredHeaders(standardHeaders(req), acl),
    ...(algorithm ? { checksum: { algorithm: algorithm.toUpperCase(), ...(type ? { type: type.toUpperCase() as 'COMPOSITE' | 'FULL_OBJECT' } : {}) } } : {}),
    sse: sseRequestOf('CreateMultipartUpload', req.headers),
    bucketRecord: bucketInfo,
  });
  setSseHeaders(res, sse);
  if (checksum) {
    res.setHeader('x-amz-checksum-algorithm', checksum.algorithm);
    res.setHeader('x-amz-checksum-type', checksum.type);
  }
  setAbortDate(res, bucketInfo.lifecycle, { key, initiated: new Date() });
  sendXml(res, 'InitiateMultipartUploadResult', { Bucket: bucket, Key: key, UploadId: uploadId });
};

/** PUT /bucket/key?partNumber=N&uploadId=X (streamed). */
export const uploadPart: S3Handler = async (s3) => {
  const { req, res, bucket, key, query, deps } = s3;
  let body;
  try {
    const bucketInfo = await target(s3);
    // The part number's syntax here; its range (1-10000) is the object layer's to judge.
    const partNumber = readPartNumber(query.get('partNumber'));
    const length = objectLength(req, res);
    const md5 = readContentMd5(req.headers['content-md5']);
    const upload = objectBody(req, res);
    body = upload.body;
    const { etag } = await deps.objects.uploadPart(
      bucket,
      key,
      query.get('uploadId') ?? '',
      partNumber,
      {
        contentLength: length,
        contentMd5: md5,
        checksumAlgorithm: upload.checksum?.checksum.algorithm,
        ...checksumHeadersOf(upload),
        sse: sseRequestOf('UploadPart', req.headers),
        bucketRecord: bucketInfo,
      },
      body,
      state(res).clientGone,
    );
    res.setHeader('ETag', quoted(etag));
    setSseHeaders(res, customerKeyAnswer(req));
    if (upload.checksum?.value) res.setHeader(upload.checksum.checksum.header, upload.checksum.value);
    sendStatus(res, 200);
  } catch (err) {
    discard(body ?? req);
    throw err;
  }
};

/** PUT /bucket/key?partNumber=N&uploadId=X with x-amz-copy-source[-range]. */
export const uploadPartCopy: S3Handler = async (s3) => {
  const { req, res, bucket, key, query, deps } = s3;
  discard(req);
  const bucketInfo = await target(s3);
  const partNumber = readPartNumber(query.get('partNumber'));
  const { sourceBucket, sourceKey, sourceRecord } = await copySource(s3, callerOf(res));
  // The range's form is read here; whether it lies inside the source is the object layer's to judge.
  const range = header(req, 'x-amz-copy-source-range');
  if (range !== undefined) readCopySourceRange(range);
  const conditions = copySourceConditions(req);
  const r = await deps.objects.uploadPartCopy(bucket, key, query.get('uploadId') ?? '', partNumber, {
    sourceBucket,
    sourceKey,
    ...(range ? { range } : {}),
    ...(conditions ? { conditions } : {}),
    sse: sseRequestOf('UploadPartCopy', req.headers),
    bucketRecord: bucketInfo,
    sourceBucketRecord: sourceRecord,
  });
  setSseHeaders(res, customerKeyAnswer(req));
  sendXml(res, 'CopyPartResult', {
    LastModified: new Date(r.lastModified).toISOString(),
    ETag: quoted(unquoteEtag(r.etag)),
    ...(r.checksum ? checksumXml(r.checksum) : {}),
  });
};

interface CompleteDocument {
  Part?: Array<{ PartNumber?: string; ETag?: string } & Record<string, unknown>>;
}

/** POST /bucket/key?uploadId=X with the CompleteMultipartUpload document. */
export const completeMultipartUpload: S3Handler = async (s3) => {
  const { req, res, bucket, key, query, deps } = s3;
  // An anonymous caller is asked for its document only once the ACL allowed the write (ADR 0013).
  const allowed = state(res).caller ? undefined : await target(s3);
  // x-amz-checksum-* here is the whole object's checksum, not the document's.
  const body = await readSmallBody(req, res, undefined, { checksum: false });
  const objectChecksum = objectChecksumHeader(req.headers);
  const bucketInfo = allowed ?? (await target(s3));
  const doc = parseXml<CompleteDocument>(body.toString('utf8'), 'CompleteMultipartUpload');
  // The document's shape is read here (each Part a whole PartNumber and an ETag); whether it lists any,
  // their numbers and their order are the object layer's to judge (checkPartOrder).
  const parts = (doc.Part ?? []).map((p) => {
    if (typeof p.PartNumber !== 'string' || !/^\d{1,15}$/.test(p.PartNumber.trim()) || typeof p.ETag !== 'string')
      throw new S3Error('MalformedXML', 'Each Part needs a PartNumber (a whole number) and an ETag.');
    const checksum = listedPartChecksum(p);
    // An ETag is compared, not kept: the space around it (a pretty-printed document) is no part of it.
    return { partNumber: Number(p.PartNumber.trim()), etag: unquoteEtag(p.ETag), ...(checksum ? { checksum } : {}) };
  });
  // Conditional writes (S3 since 2024): If-None-Match: * refuses to replace an object, If-Match an other version.
  const conditions = readWriteConditions(req);
  const meta = await deps.objects.completeMultipart(
    bucket,
    key,
    query.get('uploadId') ?? '',
    parts,
    conditions,
    objectChecksum,
    bucketInfo,
    state(res).caller ? undefined : true,
  );
  setExpiration(res, bucketInfo.lifecycle, { key, size: meta.size, lastModified: meta.lastModified, tags: meta.tags });
  setSseHeaders(res, meta.sse);
  const checksum = storedChecksum(meta.headers);
  sendXml(res, 'CompleteMultipartUploadResult', {
    Location: `/${bucket}/${urlEncodeKey(key)}`,
    Bucket: bucket,
    Key: key,
    ETag: quoted(unquoteEtag(meta.etag)),
    ...(checksum ? checksumXml(checksum) : {}),
  });
};

/**
 * DELETE /bucket/key?uploadId=X. S3 (s3:AbortMultipartUpload, which no ACL permission maps to): the
 * bucket's owner and the upload's initiator, so a WRITE grant does not let one writer end another's upload.
 */
export const abortMultipartUpload: S3Handler = async (s3) => {
  const bucketInfo = await s3.deps.buckets.existing(s3.bucket);
  if (state(s3.res).caller?.username !== bucketInfo.owner) await listablePartsOf(s3, { maxParts: 1, partNumberMarker: 0 }, bucketInfo);
  await s3.deps.objects.abortMultipart(s3.bucket, s3.key, s3.query.get('uploadId') ?? '', bucketInfo);
  sendStatus(s3.res, 204);
};

/**
 * The parts of an upload the caller may list (or abort). S3 (s3:ListMultipartUploadParts, which no ACL
 * permission maps to): the bucket's owner and the upload's initiator, nobody by a grant. To a caller who could not
 * have started an upload here (no WRITE on the bucket), an unknown upload is AccessDenied, not NoSuchUpload.
 * The initiator of an upload begun anonymously is the anonymous principal: any anonymous caller, while the
 * bucket's ACL still grants AllUsers WRITE (ADR 0013) — and no signed user but the bucket owner.
 */
async function listablePartsOf(
  s3: S3Request,
  query: { maxParts: number; partNumberMarker: number },
  /** The bucket's record, when the request already resolved it. */
  resolved?: BucketInfo,
): Promise<{ bucketInfo: BucketInfo; r: ListPartsResult }> {
  const { res, bucket, key, deps } = s3;
  const caller = state(res).caller?.username;
  const bucketInfo = resolved ?? (await deps.buckets.existing(bucket));
  const isOwner = caller !== undefined && caller === bucketInfo.owner;
  const mayWrite = () => bucketAllows(bucketInfo, caller, 'WRITE', deps.buckets.platformBlocksPublic);
  if (caller === undefined && !mayWrite()) throw new S3Error('AccessDenied');
  const r = await deps.objects.listParts(bucket, key, s3.query.get('uploadId') ?? '', query, bucketInfo).catch((err: unknown) => {
    if (!isOwner && err instanceof S3Error && err.code === 'NoSuchUpload' && !mayWrite()) throw new S3Error('AccessDenied');
    throw err;
  });
  const initiated = caller === undefined ? r.anonymous === true : r.owner === caller && !r.anonymous;
  if (!isOwner && !initiated) throw new S3Error('AccessDenied');
  return { bucketInfo, r };
}

/** GET /bucket/key?uploadId=X */
export const listParts: S3Handler = async (s3) => {
  const { res, bucket, key, query } = s3;
  const maxParts = readPageSize(query.get('max-parts'), 'max-parts');
  const marker = readWholeNumber(query.get('part-number-marker'), 'part-number-marker', 0);
  const uploadId = query.get('uploadId') ?? '';
  const { bucketInfo, r } = await listablePartsOf(s3, { maxParts, partNumberMarker: marker });
  setAbortDate(res, bucketInfo.lifecycle, { key, initiated: new Date(r.initiated) });
  sendXml(res, 'ListPartsResult', {
    Bucket: bucket,
    Key: key,
    UploadId: uploadId,
    Initiator: owner(r.owner),
    Owner: owner(r.owner),
    StorageClass: 'STANDARD',
    PartNumberMarker: marker,
    ...(r.isTruncated && r.nextPartNumberMarker !== undefined ? { NextPartNumberMarker: r.nextPartNumberMarker } : {}),
    MaxParts: maxParts,
    IsTruncated: r.isTruncated,
    ...(r.checksumAlgorithm ? { ChecksumAlgorithm: r.checksumAlgorithm, ChecksumType: r.checksumType } : {}),
    Part: r.parts.map((p) => ({
      PartNumber: p.partNumber,
      LastModified: new Date(p.lastModified).toISOString(),
      ETag: quoted(unquoteEtag(p.etag)),
      Size: p.size,
      ...(p.checksum && r.checksumAlgorithm ? checksumXml({ algorithm: r.checksumAlgorithm, value: p.checksum }) : {}),
    })),
  });
};

/**
 * GET /bucket?uploads — prefix, delimiter (CommonPrefixes), key-marker / upload-id-marker, max-uploads,
 * encoding-type. Who may: the bucket's READ grant (S3 maps READ on a bucket to s3:ListBucketMultipartUploads),
 * anonymous callers included.
 */
export const listMultipartUploads: S3Handler = async ({ res, bucket, query, deps }) => {
  const bucketInfo = await deps.buckets.permitted(bucket, state(res).caller, 'READ');
  const maxUploads = readPageSize(query.get('max-uploads'), 'max-uploads');
  const encode = encoderOf(query);
  const prefix = query.get('prefix') ?? '';
  const delimiter = query.get('delimiter') ?? '';
  const keyMarker = query.get('key-marker') ?? '';
  const uploadIdMarker = query.get('upload-id-marker') ?? '';
  const r =
    maxUploads === 0
      ? { uploads: [], commonPrefixes: [], isTruncated: false }
      : await deps.objects.listUploads(
          bucket,
          {
            prefix: prefix || undefined,
            delimiter: delimiter || undefined,
            keyMarker: keyMarker || undefined,
            uploadIdMarker: uploadIdMarker || undefined,
            maxUploads,
          },
          bucketInfo,
        );
  sendXml(res, 'ListMultipartUploadsResult', {
    Bucket: bucket,
    KeyMarker: encode(keyMarker),
    UploadIdMarker: uploadIdMarker,
    ...(r.isTruncated && r.nextKeyMarker ? { NextKeyMarker: encode(r.nextKeyMarker), NextUploadIdMarker: r.nextUploadIdMarker ?? '' } : {}),
    Prefix: encode(prefix),
    ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
    MaxUploads: maxUploads,
    IsTruncated: r.isTruncated,
    ...(query.get('encoding-type') ? { EncodingType: 'url' } : {}),
    Upload: r.uploads.map((u) => ({
      Key: encode(u.key),
      UploadId: u.uploadId,
      Initiator: owner(u.owner),
      Owner: owner(u.owner),
      StorageClass: 'STANDARD',
      Initiated: new Date(u.initiated).toISOString(),
    })),
    CommonPrefixes: (r.commonPrefixes ?? []).map((p) => ({ Prefix: encode(p) })),
  });
};
