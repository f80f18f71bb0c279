import type http from 'node:http';
import { objectExpiration, uploadAbortion, type LifecycleRule, type Tag } from '../../../object-model/src/index.js';

/**
 * `x-amz-expiration` on an object's answers (GetObject, HeadObject, PutObject, CopyObject,
 * CompleteMultipartUpload): when a lifecycle rule of its bucket will expire it, and which one —
 * `expiry-date="Fri, 23 Dec 2012 00:00:00 GMT", rule-id="…"`, as S3 writes it (SDKs read it as `Expiration`).
 */
export function setExpiration(
  res: http.ServerResponse,
  rules: readonly LifecycleRule[] | undefined,
  object: { key: string; size: number; lastModified: Date | string; tags?: readonly Tag[] },
): void {
  if (!rules?.length) return; // (most buckets: nothing else is worked out)
  const lastModified = new Date(object.lastModified);
  if (Number.isNaN(lastModified.getTime())) return;
  const found = objectExpiration(rules, { ...object, lastModified });
  if (found) res.setHeader('x-amz-expiration', `expiry-date="${found.expiry.toUTCString()}", rule-id="${headerText(found.ruleId).replace(/["\\]/g, '\\$&')}"`);
}

/** `x-amz-abort-date` and `x-amz-abort-rule-id` on CreateMultipartUpload and ListParts: when a rule will abort the upload. */
export function setAbortDate(res: http.ServerResponse, rules: readonly LifecycleRule[] | undefined, upload: { key: string; initiated: Date }): void {
  if (!rules?.length || Number.isNaN(upload.initiated.getTime())) return;
  const found = uploadAbortion(rules, upload);
  if (!found) return;
  res.setHeader('x-amz-abort-date', found.date.toUTCString());
  res.setHeader('x-amz-abort-rule-id', headerText(found.ruleId));
}

/** A rule ID as header text: characters a header cannot carry (controls, beyond ASCII) percent-encoded. */
function headerText(id: string): string {
  return id.replace(/[^\x20-\x7e]/gu, (c) => encodeURIComponent(c));
}
