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

export function assertBucketName(name: string): void {
  const problem = bucketNameProblem(name);
  if (problem) throw new S3Error('InvalidBucketName', `${problem}: ${JSON.stringify(name)}`, { BucketName: name });
}

/** Object keys: 1..1024 bytes of UTF-8, no NUL, no ".." path segment (keys may become paths in clients). */
export function assertObjectKey(key: string): void {
  if (key.length === 0) throw new S3Error('InvalidObjectName', 'the object key must not be empty');
  if (Buffer.byteLength(key, 'utf8') > 1024) throw new S3Error('KeyTooLongError', 'object keys are at most 1024 bytes of UTF-8', { Key: key.slice(0, 64) });
  if (key.includes('\0')) throw new S3Error('InvalidObjectName', 'object keys must not contain NUL', { Key: key.replace(/\0/g, '\\0') });
  if (key.split('/').includes('..')) throw new S3Error('InvalidObjectName', 'object keys must not contain a ".." segment', { Key: key });
}
