import { S3Error } from './s3-errors.js';

/** A tag of a bucket (PutBucketTagging) or an object (x-amz-tagging, PutObjectTagging) as the services keep them (JSON), in the order given. */
export interface Tag {
  key: string;
  value: string;
}

/** A bucket's tag (the same shape as an object's). */
export type BucketTag = Tag;

/** S3's limit of tags on a bucket. */
export const MAX_BUCKET_TAGS = 50;

/** S3's limit of tags on an object. */
export const MAX_OBJECT_TAGS = 10;

/** Letters, digits, spaces and + - = . _ : / @ (S3's tag characters). */
const TAG_TEXT = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u;

/**
 * A tag set checked as S3 checks it (the gateway on what clients send, the other services on what
 * reaches their internal API): keys of 1 to 128 characters, values up to 256, S3's characters only, no
 * `aws:` keys, no key twice, at most 50 tags on a bucket and 10 on an object. InvalidTag otherwise.
 */
export function checkTagSet(tags: readonly Tag[], of: 'bucket' | 'object'): Tag[] {
  for (const { key, value } of tags) {
    if (key.length === 0 || key.length > 128 || value.length > 256) throw new S3Error('InvalidTag', 'A tag key is 1 to 128 characters, a value at most 256.');
    if (!TAG_TEXT.test(key) || !TAG_TEXT.test(value)) throw new S3Error('InvalidTag', 'Tags may contain letters, digits, spaces and + - = . _ : / @ only.');
    if (key.toLowerCase().startsWith('aws:')) throw new S3Error('InvalidTag', 'System tags cannot be added/updated by requester');
  }
  const max = of === 'bucket' ? MAX_BUCKET_TAGS : MAX_OBJECT_TAGS;
  if (tags.length > max) throw new S3Error('InvalidTag', `${of === 'bucket' ? 'Bucket' : 'Object'} tag count cannot be greater than ${max}`);
  if (new Set(tags.map((t) => t.key)).size !== tags.length) throw new S3Error('InvalidTag', 'Cannot provide multiple Tags with the same key');
  return [...tags];
}

/** `x-amz-tagging` (also a POST form's): tags as a URL query string, `k1=v1&k2=v2`; empty: none. */
export function parseTaggingHeader(raw: string): Tag[] {
  if (raw.trim() === '') return [];
  const tags = raw.split('&').map((pair) => {
    const eq = pair.indexOf('=');
    const [key, value] = eq < 0 ? [pair, ''] : [pair.slice(0, eq), pair.slice(eq + 1)];
    return { key: decodeQueryPart(key), value: decodeQueryPart(value) };
  });
  return checkTagSet(tags, 'object');
}

function decodeQueryPart(part: string): string {
  try {
    return decodeURIComponent(part.replaceAll('+', ' '));
  } catch {
    throw new S3Error('InvalidTag', 'x-amz-tagging must be URL-encoded key=value pairs joined by &.');
  }
}

/** An object's tags as another service sent them (JSON), checked; undefined when absent. */
export function objectTagsFromJson(value: unknown): Tag[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || !value.every((t) => typeof t === 'object' && t !== null && typeof t.key === 'string' && typeof t.value === 'string')) {
    throw new S3Error('InvalidTag', 'tags must be a list of {key, value} strings');
  }
  return checkTagSet(
    value.map((t: Tag) => ({ key: t.key, value: t.value })),
    'object',
  );
}
