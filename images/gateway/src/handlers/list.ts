import { readPageSize, S3Error, storedChecksum, type ObjectMeta } from '../../../object-model/src/index.js';
import { state } from '../context.js';
import type { S3Handler } from '../s3/operation.js';
import { owner, quoted, sendXml } from '../s3/render.js';
import { encoderOf } from '../s3/request.js';

function contents(objects: ObjectMeta[], encode: (s: string) => string, withOwner: string | undefined) {
  return objects.map((o) => ({
    Key: encode(o.key),
    LastModified: new Date(o.lastModified).toISOString(),
    ETag: quoted(o.etag),
    ...checksumOf(o),
    Size: o.size,
    ...(withOwner ? { Owner: owner(withOwner) } : {}),
    StorageClass: 'STANDARD',
  }));
}

/** The algorithm and type of the object's checksum, as listings name them (S3's order: after ETag). */
function checksumOf(o: ObjectMeta): { ChecksumAlgorithm?: string; ChecksumType?: string } {
  const checksum = storedChecksum(o.headers);
  return checksum ? { ChecksumAlgorithm: checksum.algorithm, ChecksumType: checksum.type } : {};
}

/** What every listing reads first: the bucket's owner (as the objects' owner), its page size, key encoding, prefix and delimiter. */
async function listing({ res, bucket, query, deps }: Parameters<S3Handler>[0]) {
  // Anonymous callers and other users list where the bucket's ACL grants them READ. Objects are shown as
  // the bucket owner's (who holds every permission on them).
  const info = await deps.buckets.permitted(bucket, state(res).caller, 'READ');
  const caller = { username: info.owner };
  const prefix = query.get('prefix') ?? '';
  const delimiter = query.get('delimiter') ?? '';
  const encode = encoderOf(query);
  return {
    caller,
    /** The bucket's record the listing was authorised against: it lists that bucket. */
    record: info,
    maxKeys: readPageSize(query.get('max-keys'), 'max-keys'),
    encode,
    prefix,
    delimiter,
    /** The listing's own filters, with empty values left out. */
    filter: { prefix: prefix || undefined, delimiter: delimiter || undefined },
    /** The answer's common part after its markers: the delimiter, truncation and the key encoding. */
    page: (isTruncated: boolean) => ({
      ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
      IsTruncated: isTruncated,
      ...(query.get('encoding-type') ? { EncodingType: 'url' } : {}),
    }),
  };
}

/** GET /bucket?list-type=2 */
export const listObjectsV2: S3Handler = async (request) => {
  const { res, bucket, query, deps } = request;
  const { caller, record, maxKeys, encode, prefix, delimiter, filter } = await listing(request);
  const startAfter = query.get('start-after') ?? '';
  const token = query.get('continuation-token') ?? undefined;
  // Sent empty, the token is wrong (S3), not absent.
  if (token === '') throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect.', { ArgumentName: 'continuation-token' });
  const r = await deps.objects.listObjects(bucket, { ...filter, maxKeys, startAfter: startAfter || undefined, continuationToken: token }, record);
  sendXml(res, 'ListBucketResult', {
    Name: bucket,
    Prefix: encode(prefix),
    ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
    MaxKeys: maxKeys,
    KeyCount: r.objects.length + r.commonPrefixes.length,
    IsTruncated: r.isTruncated,
    ...(token !== undefined ? { ContinuationToken: token } : {}),
    ...(r.isTruncated && r.nextContinuationToken ? { NextContinuationToken: r.nextContinuationToken } : {}),
    ...(startAfter ? { StartAfter: encode(startAfter) } : {}),
    ...(query.get('encoding-type') ? { EncodingType: 'url' } : {}),
    Contents: contents(r.objects, encode, query.get('fetch-owner') === 'true' ? caller.username : undefined),
    CommonPrefixes: r.commonPrefixes.map((p) => ({ Prefix: encode(p) })),
  });
};

/** GET /bucket (ListObjects v1: marker / NextMarker), what s3cmd and rclone use. */
export const listObjectsV1: S3Handler = async (request) => {
  const { res, bucket, query, deps } = request;
  const { caller, record, maxKeys, encode, prefix, filter, page } = await listing(request);
  const marker = query.get('marker') ?? '';
  const r = await deps.objects.listObjects(bucket, { ...filter, maxKeys, marker: marker || undefined }, record);
  // S3 sends NextMarker only with a delimiter; sending it always is allowed and saves clients a guess.
  const last = [...r.objects.map((o) => o.key), ...r.commonPrefixes].sort().at(-1);
  const nextMarker = r.isTruncated ? (r.nextMarker ?? last) : undefined;
  sendXml(res, 'ListBucketResult', {
    Name: bucket,
    Prefix: encode(prefix),
    Marker: encode(marker),
    ...(nextMarker ? { NextMarker: encode(nextMarker) } : {}),
    MaxKeys: maxKeys,
    ...page(r.isTruncated),
    Contents: contents(r.objects, encode, caller.username),
    CommonPrefixes: r.commonPrefixes.map((p) => ({ Prefix: encode(p) })),
  });
};

/** GET /bucket?versions: without versioning each object appears once, VersionId "null". */
export const listObjectVersions: S3Handler = async (request) => {
  const { res, bucket, query, deps } = request;
  const { caller, record, maxKeys, encode, prefix, filter, page } = await listing(request);
  const keyMarker = query.get('key-marker') ?? '';
  const r = await deps.objects.listObjects(bucket, { ...filter, maxKeys, marker: keyMarker || undefined }, record);
  const last = [...r.objects.map((o) => o.key), ...r.commonPrefixes].sort().at(-1);
  sendXml(res, 'ListVersionsResult', {
    Name: bucket,
    Prefix: encode(prefix),
    KeyMarker: encode(keyMarker),
    VersionIdMarker: '',
    ...(r.isTruncated && last ? { NextKeyMarker: encode(r.nextMarker ?? last), NextVersionIdMarker: 'null' } : {}),
    MaxKeys: maxKeys,
    ...page(r.isTruncated),
    Version: r.objects.map((o) => ({
      Key: encode(o.key),
      VersionId: 'null',
      IsLatest: true,
      LastModified: new Date(o.lastModified).toISOString(),
      ETag: quoted(o.etag),
      Size: o.size,
      Owner: owner(caller.username),
      StorageClass: 'STANDARD',
    })),
    CommonPrefixes: r.commonPrefixes.map((p) => ({ Prefix: encode(p) })),
  });
};
