import type { Response } from 'express';
import { objectExpiration, type LifecycleRule } from '../../../service-kit/src/index.js';

/**
 * `x-amz-expiration` on an object's answers (GetObject, HeadObject, PutObject, CopyObject,
 * CompleteMultipartUpload): when a lifecycle rule of its bucket will expire it, and which one —
 * `expiry-date="Fri, 23 Dec 2012 00:00:00 GMT", rule-id="…"`, as S3 writes it (SDKs read it as `Expiration`).
 */
export function setExpiration(res: Response, rules: readonly LifecycleRule[] | undefined, object: { key: string; size: number; lastModified: Date }): void {
  if (!rules?.length || Number.isNaN(object.lastModified.getTime())) return;
  const found = objectExpiration(rules, object);
  if (found) res.setHeader('x-amz-expiration', `expiry-date="${found.expiry.toUTCString()}", rule-id="${found.ruleId.replace(/["\\]/g, '\\$&')}"`);
}
