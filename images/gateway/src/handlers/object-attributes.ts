import { S3Error, storedChecksum } from '../../../service-kit/src/index.js';
import { callerOf } from '../context.js';
import { validateKey } from '../middleware/bucket-access.js';
import type { S3Handler } from '../s3/operation.js';
import { checksumXml } from '../s3/checksums.js';
import { sendXml } from '../s3/render.js';
import { header, unquote } from '../s3/request.js';

const ATTRIBUTES = new Set(['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize']);

/**
 * GET /bucket/key?attributes (GetObjectAttributes): the attributes named in `x-amz-object-attributes`,
 * from the object's metadata without reading its bytes. `Checksum` is there when the object was
 * uploaded with one; a multipart object's parts are given as their count (the parts themselves are
 * not kept once composed).
 */
export const getObjectAttributes: S3Handler = async ({ req, res, bucket, key, deps }) => {
  validateKey(key);
  const wanted = (header(req, 'x-amz-object-attributes') ?? '').split(',').map((a) => a.trim()).filter(Boolean);
  if (wanted.length === 0) throw new S3Error('InvalidArgument', 'The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty.', { ArgumentName: 'x-amz-object-attributes' });
  const unknown = wanted.find((a) => !ATTRIBUTES.has(a));
  if (unknown) throw new S3Error('InvalidArgument', `Invalid attribute name specified: ${unknown}.`, { ArgumentName: 'x-amz-object-attributes' });
  await deps.buckets.owned(bucket, callerOf(res));
  const meta = await deps.controlPlane.headObject(bucket, key);
  const etag = unquote(meta.etag);
  const parts = /-(\d+)$/.exec(etag)?.[1];
  const checksum = wanted.includes('Checksum') ? storedChecksum(meta.headers) : undefined;
  res.setHeader('Last-Modified', new Date(meta.lastModified).toUTCString());
  sendXml(res, 'GetObjectAttributesResponse', {
    ...(wanted.includes('ETag') ? { ETag: etag } : {}),
    ...(checksum ? { Checksum: checksumXml(checksum) } : {}),
    ...(wanted.includes('ObjectParts') && parts ? { ObjectParts: { PartsCount: Number(parts) } } : {}),
    ...(wanted.includes('StorageClass') ? { StorageClass: 'STANDARD' } : {}),
    ...(wanted.includes('ObjectSize') ? { ObjectSize: meta.size } : {}),
  });
};
