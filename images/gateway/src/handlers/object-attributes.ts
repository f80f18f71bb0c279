import { readPageSize, readWholeNumber, S3Error, storedChecksum, unquoteEtag, type BucketInfo, type ObjectChecksum } from '../../../object-model/src/index.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { checksumXml } from '../s3/checksums.js';
import { sendXml } from '../s3/render.js';
import { sseRequestOf } from '../s3/encryption.js';
import { header } from '../s3/request.js';
import { readable } from './object-read.js';

const ATTRIBUTES = new Set(['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize']);

/** `x-amz-max-parts` (a page size, as ListParts' max-parts) and `x-amz-part-number-marker` (default 0). */
function partsPage(req: S3Request['req']): { maxParts: number; marker: number } {
  return {
    maxParts: readPageSize(header(req, 'x-amz-max-parts'), 'x-amz-max-parts'),
    marker: readWholeNumber(header(req, 'x-amz-part-number-marker'), 'x-amz-part-number-marker', 0),
  };
}

/**
 * ObjectParts of a multipart object: its parts' count, and — as S3 gives them, only for an object with
 * a checksum — a page of its parts with their sizes and checksums.
 */
async function objectParts(s3: S3Request, record: BucketInfo, partsCount: number, checksum: ObjectChecksum | undefined): Promise<Record<string, unknown>> {
  const { maxParts, marker } = partsPage(s3.req);
  if (!checksum) return { PartsCount: partsCount };
  const parts = await s3.deps.objects.objectParts(s3.bucket, s3.key, record);
  const rest = parts.filter((p) => p.partNumber > marker && p.checksum !== undefined);
  const page = rest.slice(0, maxParts);
  return {
    PartsCount: parts.length || partsCount,
    PartNumberMarker: marker,
    NextPartNumberMarker: page.at(-1)?.partNumber ?? marker,
    MaxParts: maxParts,
    IsTruncated: rest.length > page.length,
    Part: page.map((p) => ({ PartNumber: p.partNumber, Size: p.size, [`Checksum${checksum.algorithm}`]: p.checksum })),
  };
}

/**
 * GET /bucket/key?attributes (GetObjectAttributes): the attributes named in `x-amz-object-attributes`,
 * from the object's metadata without reading its bytes. `Checksum` is there when the object was
 * uploaded with one; a multipart object's parts are given as their count, and listed (`x-amz-max-parts`,
 * `x-amz-part-number-marker`) with their sizes and checksums when the object has a checksum.
 * Who may: as GetObject (the object's READ grant; an SSE-C object's key, as HEAD).
 */
export const getObjectAttributes: S3Handler = async (s3) => {
  const { req, res, bucket, key, deps } = s3;
  const wanted = (header(req, 'x-amz-object-attributes') ?? '')
    .split(',')
    .map((a) => a.trim())
    .filter(Boolean);
  if (wanted.length === 0)
    throw new S3Error('InvalidArgument', 'The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty.', {
      ArgumentName: 'x-amz-object-attributes',
    });
  const unknown = wanted.find((a) => !ATTRIBUTES.has(a));
  if (unknown) throw new S3Error('InvalidArgument', `Invalid attribute name specified: ${unknown}.`, { ArgumentName: 'x-amz-object-attributes' });
  // S3: READ access to the object (its ACL's READ grant, as GetObject), anonymous callers included.
  const record = await readable(s3);
  // Read as a HEAD is, SSE-C key included: an object encrypted with a customer key tells its attributes
  // only to who gives that key (none: InvalidRequest, another: AccessDenied, as S3).
  const sse = sseRequestOf('GetObjectAttributes', req.headers);
  const { object: meta } = await deps.objects.getObject(bucket, key, { method: 'HEAD', sse, bucketRecord: record });
  const etag = unquoteEtag(meta.etag);
  const parts = /-(\d+)$/.exec(etag)?.[1];
  const stored = storedChecksum(meta.headers);
  const checksum = wanted.includes('Checksum') ? stored : undefined;
  const objectPartsXml = wanted.includes('ObjectParts') && parts ? await objectParts(s3, record, Number(parts), stored) : undefined;
  res.setHeader('Last-Modified', new Date(meta.lastModified).toUTCString());
  sendXml(res, 'GetObjectAttributesResponse', {
    ...(wanted.includes('ETag') ? { ETag: etag } : {}),
    ...(checksum ? { Checksum: checksumXml(checksum) } : {}),
    ...(objectPartsXml ? { ObjectParts: objectPartsXml } : {}),
    ...(wanted.includes('StorageClass') ? { StorageClass: 'STANDARD' } : {}),
    ...(wanted.includes('ObjectSize') ? { ObjectSize: meta.size } : {}),
  });
};
