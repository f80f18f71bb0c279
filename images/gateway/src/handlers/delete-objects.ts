import { S3Error } from '../../../service-kit/src/index.js';
import { callerOf } from '../context.js';
import type { S3Handler } from '../s3/operation.js';
import { readCheckedDocument } from '../s3/request.js';
import { sendXml } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';

interface DeleteDocument {
  Quiet?: string;
  Object?: Array<{ Key?: string; VersionId?: string }>;
}

/** POST /bucket?delete — up to 1000 keys; Content-MD5 checked when sent; Quiet lists only errors. */
export const deleteObjects: S3Handler = async ({ req, res, bucket, deps }) => {
  const caller = callerOf(res);
  const body = await readCheckedDocument(req, res);
  await deps.buckets.owned(bucket, caller);
  const doc = parseXml<DeleteDocument>(body.toString('utf8'), 'Delete');
  const objects = doc.Object ?? [];
  if (objects.length === 0 || objects.length > 1000) throw new S3Error('MalformedXML', 'A Delete request names between 1 and 1000 objects.');
  const keys = objects.map((o) => {
    if (typeof o.Key !== 'string' || o.Key === '') throw new S3Error('MalformedXML', 'Every Object in a Delete request needs a Key.');
    return o.Key;
  });
  const quiet = doc.Quiet === 'true';
  const r = await deps.controlPlane.deleteObjects(bucket, keys);
  sendXml(res, 'DeleteResult', {
    Deleted: quiet ? [] : r.deleted.map((k) => ({ Key: k })),
    Error: r.errors.map((e) => ({ Key: e.key, Code: e.code, Message: e.message })),
  });
};
