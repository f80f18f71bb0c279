import type { Tag } from './tags.js';

/**
 * A bucket's lifecycle configuration as the services keep and exchange it (JSON): the gateway maps
 * S3's `LifecycleConfiguration` XML to it and back, the control plane stores it with the bucket and
 * applies it in the daily job.
 */
export interface LifecycleRule {
  /** S3's `ID` (unique within the configuration, at most 255 characters). */
  id: string;
  enabled: boolean;
  filter: LifecycleFilter;
  /** Expire current objects: `days` after creation (at the next midnight UTC), or from `date` (midnight UTC). */
  expiration?: { days: number } | { date: string } | { expiredObjectDeleteMarker: boolean };
  /** Abort multipart uploads still incomplete this many days after they were initiated. */
  abortIncompleteMultipartUploadDays?: number;
  /** Accepted as S3 does on a bucket whose versioning was never enabled; there are no noncurrent versions to expire. */
  noncurrentVersionExpiration?: { noncurrentDays: number; newerNoncurrentVersions?: number };
}

export interface LifecycleFilter {
  /** How the rule wrote its filter: S3's legacy `<Prefix>` in the rule, `<Filter>` with one condition, or `<Filter><And>`. */
  form: 'prefix' | 'filter' | 'and';
  prefix: string;
  tags: Array<{ key: string; value: string }>;
  /** Only objects larger than this many bytes. */
  sizeGreaterThan?: number;
  /** Only objects smaller than this many bytes. */
  sizeLessThan?: number;
}

export const MAX_LIFECYCLE_RULES = 1000;

const DAY_MS = 24 * 60 * 60 * 1000;

/** S3's rule: an object created at `created` expires under `days` at the first midnight UTC at least `days` days later. */
export function expiryAfterDays(created: Date, days: number): Date {
  return new Date(Math.ceil((created.getTime() + days * DAY_MS) / DAY_MS) * DAY_MS);
}

/** The latest creation time whose expiry under `days` is at or before `now` (see expiryAfterDays). */
export function createdNoLaterThan(now: Date, days: number): Date {
  return new Date(Math.floor(now.getTime() / DAY_MS) * DAY_MS - days * DAY_MS);
}

/** Whether the rule's filter selects an object: its prefix, sizes, and every tag it names on the object. */
export function lifecycleFilterMatches(filter: LifecycleFilter, object: { key: string; size: number; tags?: readonly Tag[] }): boolean {
  return (
    filter.tags.every((wanted) => object.tags?.some((t) => t.key === wanted.key && t.value === wanted.value)) &&
    object.key.startsWith(filter.prefix) &&
    (filter.sizeGreaterThan === undefined || object.size > filter.sizeGreaterThan) &&
    (filter.sizeLessThan === undefined || object.size < filter.sizeLessThan)
  );
}

/**
 * When an object expires under the configuration, and by which rule: the earliest expiry among the
 * enabled rules that select it (what S3 reports in `x-amz-expiration`); undefined when none does.
 */
export function objectExpiration(
  rules: readonly LifecycleRule[],
  object: { key: string; size: number; lastModified: Date; tags?: readonly Tag[] },
): { expiry: Date; ruleId: string } | undefined {
  let found: { expiry: Date; ruleId: string } | undefined;
  for (const rule of rules) {
    const exp = rule.expiration;
    if (!rule.enabled || !exp || !lifecycleFilterMatches(rule.filter, object)) continue;
    const expiry = 'days' in exp ? expiryAfterDays(object.lastModified, exp.days) : 'date' in exp ? new Date(exp.date) : undefined;
    if (expiry && (!found || expiry < found.expiry)) found = { expiry, ruleId: rule.id };
  }
  return found;
}

/**
 * When a multipart upload begun at `initiated` is aborted under the configuration, and by which rule
 * (S3's `x-amz-abort-date` / `x-amz-abort-rule-id`): the earliest enabled AbortIncompleteMultipartUpload
 * rule whose prefix the key has (the job selects uploads by prefix alone).
 */
export function uploadAbortion(rules: readonly LifecycleRule[], upload: { key: string; initiated: Date }): { date: Date; ruleId: string } | undefined {
  let found: { date: Date; ruleId: string } | undefined;
  for (const rule of rules) {
    const days = rule.abortIncompleteMultipartUploadDays;
    if (!rule.enabled || days === undefined || rule.filter.tags.length > 0 || !upload.key.startsWith(rule.filter.prefix)) continue;
    const date = expiryAfterDays(upload.initiated, days);
    if (!found || date < found.date) found = { date, ruleId: rule.id };
  }
  return found;
}
