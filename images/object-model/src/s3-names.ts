// S3 naming rules shared by the services that accept bucket names and object keys.
import { S3Error } from './s3-errors.js';

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/** S3 bucket naming rules: 3-63 characters of a-z 0-9 . -, starting and ending with a letter or digit. */
export function bucketNameProblem(name: string): string | undefined {
  if (name.length < 3 || name.length > 63) return 'bucket names are 3 to 63 characters long';
  if (!/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/.test(name)) {
    return 'bucket names use lower-case letters, digits, dots and hyphens, and start and end with a letter or digit';
  }
  if (name.includes('..')) return 'bucket names must not contain two adjacent dots';
  if (name.includes('.-') || name.includes('-.')) return 'bucket names must not have a dot next to a hyphen';
  if (IPV4.test(name)) return 'bucket names must not look like an IP address';
  if (name.startsWith('xn--') || name.endsWith('-s3alias') || name.endsWith('--ol-s3')) return 'reserved bucket name prefix or suffix';
  return undefined;
}

export function isValidBucketName(name: string): boolean {
  return bucketNameProblem(name) === undefined;
}

export function assertBucketName(name: string): void {
  const problem = bucketNameProblem(name);
  if (problem) throw new S3Error('InvalidBucketName', `${problem}: ${JSON.stringify(name)}`, { BucketName: name });
}

/**
 * NUL: PostgreSQL cannot store it in text, so no key or argument may hold it. The other control
 * characters (newline, tab, ...) are accepted as S3 accepts them: answers carry them as XML character
 * references or, where asked, `encoding-type=url` (xml.ts); headers percent-encode them (object-read.ts).
 */
const NUL = '\u0000';

/** `value` with its NULs written as `\x00` (safe to echo in an XML error). */
function visible(value: string): string {
  return value.replaceAll(NUL, '\\x00');
}

/** Object keys: 1..1024 bytes of UTF-8, no NUL, no ".." segment (keys may become paths in clients). */
export function assertObjectKey(key: string): void {
  if (key.length === 0) throw new S3Error('InvalidObjectName', 'the object key must not be empty');
  // (A UTF-16 unit is at most 3 bytes of UTF-8: shorter keys need no count.)
  if (key.length * 3 > 1024 && Buffer.byteLength(key, 'utf8') > 1024)
    throw new S3Error('KeyTooLongError', 'object keys are at most 1024 bytes of UTF-8', { Key: key.slice(0, 64) });
  if (key.includes(NUL)) throw new S3Error('InvalidObjectName', 'object keys must not contain NUL', { Key: visible(key) });
  if (hasDotDotSegment(key)) throw new S3Error('InvalidObjectName', 'object keys must not contain a ".." segment', { Key: key });
}

/** Whether a "/"-separated segment of `key` is "..". (Every request's key is checked: no array of its segments.) */
function hasDotDotSegment(key: string): boolean {
  if (!key.includes('..')) return false;
  return key === '..' || key.startsWith('../') || key.endsWith('/..') || key.includes('/../');
}

/**
 * A text argument of a request (prefix, delimiter, marker, continuation token, response-* override,
 * any query parameter): no NUL. InvalidArgument names it.
 */
export function assertTextArgument(name: string, value: string): void {
  if (name.includes(NUL)) throw new S3Error('InvalidArgument', 'query parameter names must not contain NUL', { ArgumentName: visible(name) });
  if (value.includes(NUL)) throw new S3Error('InvalidArgument', `${name} must not contain NUL`, { ArgumentName: name, ArgumentValue: visible(value) });
}

/**
 * Whether a percent-encoded URL component escapes bytes that are not UTF-8 (`%FF`, `%C3` alone):
 * such a name cannot be text, and decoding it leniently would give two URLs one object. A `%` that
 * starts no escape is left to the caller's decoding.
 */
export function hasNonUtf8Escapes(raw: string): boolean {
  if (!raw.includes('%')) return false;
  try {
    decodeURIComponent(raw.replace(/%(?![0-9A-Fa-f]{2})/g, '%25'));
    return false;
  } catch {
    return true;
  }
}
