import type { BucketInfo } from '../../../object-model/src/index.js';
import { callerOf } from '../context.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { sendXml, sendStatus } from '../s3/render.js';
import { discard, readCheckedDocument } from '../s3/request.js';
import { parseTagging, renderTagging, type TaggingXml } from '../s3/tagging-xml.js';
import { parseXml } from '../s3/xml.js';

/**
 * Get/Put/DeleteObjectTagging: the object's tags, kept with its current version in the metadata (an
 * overwrite brings its own tags, or none; a copy keeps the source's unless x-amz-tagging-directive is
 * REPLACE). NoSuchKey for a key with no object. Lifecycle rules select objects by them.
 * Who may: the bucket's owner. In S3, s3:GetObjectTagging and s3:PutObjectTagging are the bucket owner's by
 * default and no ACL permission maps to them (READ on an object is s3:GetObject only), so no grant gives them.
 */

/** The bucket's record, if the caller owns it: the call below goes to that bucket. */
function ownedObject(s3: S3Request): Promise<BucketInfo> {
  return s3.deps.buckets.owned(s3.bucket, callerOf(s3.res));
}

export const getObjectTagging: S3Handler = async (s3) => {
  discard(s3.req);
  const record = await ownedObject(s3);
  const meta = await s3.deps.objects.headObject(s3.bucket, s3.key, record);
  sendXml(s3.res, 'Tagging', renderTagging(meta.tags ?? []));
};

/** As S3: the document must come with Content-MD5 or a flexible checksum; it replaces every tag. */
export const putObjectTagging: S3Handler = async (s3) => {
  const body = await readCheckedDocument(s3.req, s3.res, { required: true });
  const record = await ownedObject(s3);
  const tags = parseTagging(parseXml<TaggingXml>(body.toString('utf8'), 'Tagging'), 'object');
  await s3.deps.objects.putObjectTags(s3.bucket, s3.key, tags, record);
  sendStatus(s3.res, 200);
};

export const deleteObjectTagging: S3Handler = async (s3) => {
  discard(s3.req);
  const record = await ownedObject(s3);
  await s3.deps.objects.putObjectTags(s3.bucket, s3.key, [], record);
  sendStatus(s3.res, 204);
};
