import { etagMatches } from './etags.js';
import { S3Error } from './s3-errors.js';

/** The conditions a read (If-*) or a copy's source (x-amz-copy-source-if-*) puts on an object; times as the client sent them. */
export interface ObjectConditions {
  ifMatch?: string;
  ifNoneMatch?: string;
  ifModifiedSince?: string;
  ifUnmodifiedSince?: string;
}

export type ConditionName = 'If-Match' | 'If-None-Match' | 'If-Modified-Since' | 'If-Unmodified-Since';

/** What the conditions decide: serve the object, or answer 304 / 412 naming the condition that decided. */
export type PreconditionOutcome = { status: 200 } | { status: 304 | 412; condition: ConditionName };

const SERVE: PreconditionOutcome = { status: 200 };

/** Whole seconds of a time (HTTP dates have no finer resolution); NaN for text that is no date. */
const seconds = (time: string | Date) => Math.floor(new Date(time).getTime() / 1000);

/**
 * S3's (and RFC 9110's) evaluation of conditional requests against an object's ETag and last-modified
 * time, in its precedence: If-Match failing is 412, and when If-Match is absent If-Unmodified-Since
 * failing is 412; then If-None-Match matching is 304, and when If-None-Match is absent If-Modified-Since
 * not modified is 304. A date that does not parse is ignored, as S3 ignores it. Every place that
 * decides a condition (reads, copy sources) decides it here, from metadata, before any byte is read.
 */
export function evaluatePreconditions(object: { etag: string; lastModified: string | Date }, c: ObjectConditions | undefined): PreconditionOutcome {
  if (!c) return SERVE;
  const modified = seconds(object.lastModified);
  if (c.ifMatch !== undefined) {
    if (!etagMatches(c.ifMatch, object.etag)) return { status: 412, condition: 'If-Match' };
  } else if (c.ifUnmodifiedSince !== undefined) {
    const t = seconds(c.ifUnmodifiedSince);
    if (!Number.isNaN(t) && modified > t) return { status: 412, condition: 'If-Unmodified-Since' };
  }
  if (c.ifNoneMatch !== undefined) {
    if (etagMatches(c.ifNoneMatch, object.etag)) return { status: 304, condition: 'If-None-Match' };
  } else if (c.ifModifiedSince !== undefined) {
    const t = seconds(c.ifModifiedSince);
    if (!Number.isNaN(t) && modified <= t) return { status: 304, condition: 'If-Modified-Since' };
  }
  return SERVE;
}

/** A read's conditions: PreconditionFailed (naming the condition) on 412; true when the answer is 304 Not Modified. */
export function notModified(object: { etag: string; lastModified: string | Date }, c: ObjectConditions | undefined): boolean {
  const outcome = evaluatePreconditions(object, c);
  if (outcome.status === 412) throw new S3Error('PreconditionFailed', undefined, { Condition: outcome.condition });
  return outcome.status === 304;
}

/** A copy's source conditions (x-amz-copy-source-if-*): a copy has no 304, so every condition that does not hold is PreconditionFailed. */
export function checkCopySourceConditions(c: ObjectConditions | undefined, source: { etag: string; lastModified: string | Date }): void {
  const outcome = evaluatePreconditions(source, c);
  if (outcome.status !== 200) throw new S3Error('PreconditionFailed', undefined, { Condition: `x-amz-copy-source-${outcome.condition}` });
}

/** The fields of `values` that are set; undefined when none is (a request without conditions). */
export function definedConditions<T extends Record<string, string | undefined>>(values: T): Partial<T> | undefined {
  const set = Object.entries(values).filter(([, v]) => v !== undefined);
  return set.length ? (Object.fromEntries(set) as Partial<T>) : undefined;
}
