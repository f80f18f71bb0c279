import { etagMatches } from './etags.js';
import { header, type RequestHeaders } from './headers.js';
import type { WriteConditions } from './object-layer.js';
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

/**
 * A request's conditions on an object, read from its headers: If-Match, If-None-Match,
 * If-Modified-Since, If-Unmodified-Since (a read's), or with `prefix` `x-amz-copy-source-` a copy's
 * conditions on its source. Undefined when it sends none.
 */
export function readConditions(req: { headers: RequestHeaders }, prefix = ''): ObjectConditions | undefined {
  return definedConditions({
    ifMatch: header(req, `${prefix}if-match`),
    ifNoneMatch: header(req, `${prefix}if-none-match`),
    ifModifiedSince: header(req, `${prefix}if-modified-since`),
    ifUnmodifiedSince: header(req, `${prefix}if-unmodified-since`),
  });
}

/** A write's conditions on the object it replaces (If-Match, If-None-Match), read from its headers; undefined when it sends none. */
export function readWriteConditions(req: { headers: RequestHeaders }): WriteConditions | undefined {
  return definedConditions({ ifMatch: header(req, 'if-match'), ifNoneMatch: header(req, 'if-none-match') });
}

/** If-Match / If-None-Match of a write against the key's current ETag (undefined: no object); PreconditionFailed or NoSuchKey as S3. */
export function checkWriteConditions(c: WriteConditions | undefined, currentEtag: string | undefined, key: string): void {
  if (!c) return;
  if (c.ifMatch !== undefined) {
    if (currentEtag === undefined) throw new S3Error('NoSuchKey', undefined, { Key: key });
    if (!etagMatches(c.ifMatch, currentEtag)) throw new S3Error('PreconditionFailed', undefined, { Condition: 'If-Match' });
  }
  if (c.ifNoneMatch !== undefined && currentEtag !== undefined && etagMatches(c.ifNoneMatch, currentEtag)) {
    throw new S3Error('PreconditionFailed', undefined, { Condition: 'If-None-Match' });
  }
}

/** What a conditional delete requires (DeleteObject's If-Match, x-amz-if-match-last-modified-time, x-amz-if-match-size; DeleteObjects' ETag, ...). */
export interface DeleteRequirements {
  ifMatch?: string;
  lastModifiedTime?: string | Date;
  size?: number;
}

/** A conditional delete's requirements against the current object (undefined: none): NoSuchKey or PreconditionFailed as S3. */
export function checkDeleteConditions(
  c: DeleteRequirements,
  current: { etag: string; size: number; lastModified: string | Date } | undefined,
  key: string,
): void {
  if (!current) throw new S3Error('NoSuchKey', undefined, { Key: key });
  if (c.ifMatch !== undefined && !etagMatches(c.ifMatch, current.etag)) throw new S3Error('PreconditionFailed', undefined, { Condition: 'If-Match' });
  if (c.lastModifiedTime !== undefined && seconds(c.lastModifiedTime) !== seconds(current.lastModified)) {
    throw new S3Error('PreconditionFailed', undefined, { Condition: 'x-amz-if-match-last-modified-time' });
  }
  if (c.size !== undefined && c.size !== current.size) throw new S3Error('PreconditionFailed', undefined, { Condition: 'x-amz-if-match-size' });
}
