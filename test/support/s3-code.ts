import { S3Error } from '../../images/object-model/src/index.js';

/** The S3 error code `fn` throws, 'accepted' when it throws nothing, or a description of a non-S3 failure. */
export function s3CodeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return err instanceof S3Error ? err.code : `not an S3Error: ${String(err)}`;
  }
  return 'accepted';
}
