import { type Logger } from '../../../service-kit/src/index.js';
import { createdNoLaterThan, type LifecycleRule } from '../../../object-model/src/index.js';
import type { Bucket, BucketKey, MetadataStore } from '../metadata/store.js';

/** The data plane keeps multipart uploads: it aborts those a rule has expired, and those of a deleted bucket. */
export interface UploadExpirer {
  /**
   * Abort the bucket's uploads whose key starts with `prefix`, initiated at or before `initiatedNoLaterThan`;
   * answers how many. Those of this very bucket (its id), not of a bucket created again under its name.
   */
  expireUploads(bucket: BucketKey & Pick<Bucket, 'backend'>, prefix: string, initiatedNoLaterThan: Date): Promise<number>;
  /** Abort every upload of a deleted bucket (by its id: a new bucket of the same name has its own); answers how many. */
  abortBucketUploads(bucketId: number): Promise<number>;
}

export interface LifecycleDeps {
  store: MetadataStore;
  uploads: UploadExpirer;
  /** After an object is expired: cached reads of it must end (the object read cache's token). */
  invalidate: (bucket: string, key: string) => Promise<void>;
  logger: Logger;
}

export interface LifecycleResult {
  /** Objects moved to the recycle bin by an expiration rule. */
  expiredObjects: number;
  /** Incomplete multipart uploads aborted. */
  abortedUploads: number;
}

/**
 * Applies every bucket's lifecycle rules once, as S3 does daily: objects an enabled rule has expired go
 * to the recycle bin (as a DeleteObject would send them: restorable until the purge), and multipart
 * uploads past the rule's days are aborted. A bucket whose pass fails is logged and left for the next
 * run; the others go on.
 */
export async function runLifecycle(deps: LifecycleDeps, now: Date): Promise<LifecycleResult> {
  const result: LifecycleResult = { expiredObjects: 0, abortedUploads: 0 };
  for (const { bucket, rules } of await deps.store.buckets.withLifecycle()) {
    try {
      for (const rule of rules) {
        if (!rule.enabled) continue;
        result.expiredObjects += await expireObjects(deps, bucket, rule, now);
        if (rule.abortIncompleteMultipartUploadDays !== undefined) {
          result.abortedUploads += await deps.uploads.expireUploads(
            bucket,
            rule.filter.prefix,
            createdNoLaterThan(now, rule.abortIncompleteMultipartUploadDays),
          );
        }
      }
    } catch (err) {
      deps.logger.warn({ err, bucket: bucket.name }, 'lifecycle pass failed for a bucket; the next run retries');
    }
  }
  if (result.expiredObjects > 0 || result.abortedUploads > 0) deps.logger.info({ ...result }, 'lifecycle rules applied');
  return result;
}

async function expireObjects(deps: LifecycleDeps, bucket: Bucket, rule: LifecycleRule, now: Date): Promise<number> {
  const exp = rule.expiration;
  let cutoff: Date | undefined;
  if (exp && 'days' in exp) cutoff = createdNoLaterThan(now, exp.days);
  // From its date on, a rule expires every object it selects, however new.
  else if (exp && 'date' in exp && new Date(exp.date) <= now) cutoff = now;
  if (!cutoff) return 0;
  const { prefix, sizeGreaterThan, sizeLessThan, tags } = rule.filter;
  const keys = await deps.store.recycleBin.expire(bucket, { prefix, createdNoLaterThan: cutoff, sizeGreaterThan, sizeLessThan, tags }, now);
  for (const key of keys) await deps.invalidate(bucket.name, key);
  return keys.length;
}
