import { S3Error, type DeleteConditions } from '../../../object-model/src/index.js';
import { state } from '../context.js';
import type { S3Handler } from '../s3/operation.js';
import { header, readCheckedDocument } from '../s3/request.js';
import { sendXml, sendStatus } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';

/**
 * A conditional delete's requirements as S3 names them — If-Match (an ETag or `*`), the object's
 * last-modified time and its size — checked here so that a bad value refuses the request before
 * anything is deleted. None given: undefined (an unconditional delete).
 */
function deleteConditions(
  ifMatch: string | undefined,
  lastModifiedTime: string | undefined,
  size: string | undefined,
  names: [string, string],
): DeleteConditions | undefined {
  const c: DeleteConditions = {};
  if (ifMatch !== undefined) c.ifMatch = ifMatch;
  if (lastModifiedTime !== undefined) {
    const t = Date.parse(lastModifiedTime);
    if (Number.isNaN(t)) throw new S3Error('InvalidArgument', `${names[0]} is not a valid timestamp.`, { ArgumentName: names[0] });
    c.lastModifiedTime = new Date(t).toISOString();
  }
  if (size !== undefined) {
    if (!/^\d{1,15}$/.test(size.trim())) throw new S3Error('InvalidArgument', `${names[1]} must be a number of bytes.`, { ArgumentName: names[1] });
    c.size = Number(size.trim());
  }
  return Object.keys(c).length ? c : undefined;
}

/**
 * DeleteObject: a soft delete into the recycle bin; 204 whether or not the key existed — unless the
 * request is conditional (If-Match, x-amz-if-match-last-modified-time, x-amz-if-match-size, as S3):
 * then the object must exist (NoSuchKey) and meet them (PreconditionFailed), or nothing is deleted.
 */
export const deleteObject: S3Handler = async ({ req, res, bucket, key, deps }) => {
  const conditions = deleteConditions(header(req, 'if-match'), header(req, 'x-amz-if-match-last-modified-time'), header(req, 'x-amz-if-match-size'), [
    'x-amz-if-match-last-modified-time',
    'x-amz-if-match-size',
  ]);
  // (Anonymous callers too, where the bucket grants AllUsers WRITE: S3's WRITE is writes and deletes.)
  const record = await deps.buckets.permitted(bucket, state(res).caller, 'WRITE');
  await deps.objects.deleteObject(bucket, key, conditions, record);
  sendStatus(res, 204);
};

interface DeleteDocument {
  Quiet?: string;
  Object?: Array<{ Key?: string; VersionId?: string; ETag?: string; LastModifiedTime?: string; Size?: string }>;
}

/**
 * POST /bucket?delete — up to 1000 keys; Content-MD5 checked when sent; Quiet lists only errors. An
 * Object with an ETag, LastModifiedTime or Size is deleted only when it matches (its error otherwise).
 */
export const deleteObjects: S3Handler = async ({ req, res, bucket, deps }) => {
  // Who may not delete here is refused before the document is read (an anonymous client waiting with
  // `Expect: 100-continue` is asked for it only once allowed).
  const record = await deps.buckets.permitted(bucket, state(res).caller, 'WRITE');
  const body = await readCheckedDocument(req, res);
  const doc = parseXml<DeleteDocument>(body.toString('utf8'), 'Delete');
  const entries = doc.Object ?? [];
  if (entries.length === 0 || entries.length > 1000) throw new S3Error('MalformedXML', 'A Delete request names between 1 and 1000 objects.');
  const objects = entries.map((o) => {
    if (typeof o.Key !== 'string' || o.Key === '') throw new S3Error('MalformedXML', 'Every Object in a Delete request needs a Key.');
    const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
    return { key: o.Key, ...deleteConditions(text(o.ETag), text(o.LastModifiedTime), text(o.Size), ['LastModifiedTime', 'Size']) };
  });
  const quiet = doc.Quiet === 'true';
  const r = await deps.objects.deleteObjects(bucket, objects, record);
  sendXml(res, 'DeleteResult', {
    Deleted: quiet ? [] : r.deleted.map((k) => ({ Key: k })),
    Error: r.errors.map((e) => ({ Key: e.key, Code: e.code, Message: e.message })),
  });
};
