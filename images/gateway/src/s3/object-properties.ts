import { requestedAcl, S3Error } from '../../../object-model/src/index.js';

/**
 * Properties a write may ask for that Strata cannot give: a storage class other than the one it has and
 * object lock (retention, legal hold). A write asking for one is refused before any byte is stored instead
 * of being stored without it: a client that asked for a WORM retention must not believe it has one.
 * `x-amz-storage-class: STANDARD` is accepted. ACL headers are checked here as S3 checks them first (an
 * unknown canned ACL, canned ACL with grants); whether the bucket takes them is the handler's question.
 */
/** Header-carried object writes (PostObject's fields are checked by its handler). */
const OBJECT_WRITES = new Set(['PutObject', 'CopyObject', 'CreateMultipartUpload']);

/** The other operations whose headers are checked below. */
const HEADER_CHECKED = new Set(['PutBucketAcl', 'PutObjectAcl', 'CreateBucket']);

/** Storage classes S3 knows (anything else is not a storage class at all). */
const S3_STORAGE_CLASSES = new Set([
  'STANDARD',
  'REDUCED_REDUNDANCY',
  'STANDARD_IA',
  'ONEZONE_IA',
  'INTELLIGENT_TIERING',
  'GLACIER',
  'DEEP_ARCHIVE',
  'OUTPOSTS',
  'GLACIER_IR',
  'SNOW',
  'EXPRESS_ONEZONE',
]);
/** Those Strata stores as its one class (reduced redundancy asks for less than it gives, as MinIO takes it). */
const STORED_CLASSES = new Set(['STANDARD', 'REDUCED_REDUNDANCY']);

const OBJECT_LOCK = ['x-amz-object-lock-mode', 'x-amz-object-lock-retain-until-date', 'x-amz-object-lock-legal-hold'];

/** A header's or form field's value by lower-case name. */
type Lookup = (name: string) => string | undefined;

/** Refusals for an object write whose headers or form fields (`lookup`, `acl` as the form names it) ask for what Strata cannot give. */
export function refuseUnsupportedObjectProperties(lookup: Lookup, acl = lookup('x-amz-acl')): void {
  const storageClass = lookup('x-amz-storage-class');
  if (storageClass !== undefined && !STORED_CLASSES.has(storageClass)) {
    throw new S3Error(
      'InvalidStorageClass',
      S3_STORAGE_CLASSES.has(storageClass) ? `Strata has one storage class, STANDARD; ${storageClass} is not offered.` : undefined,
      { StorageClassRequested: storageClass },
    );
  }
  // S3's answer for a bucket without an object lock configuration (no bucket here has one).
  const lock = OBJECT_LOCK.find((name) => lookup(name) !== undefined);
  if (lock) throw new S3Error('InvalidRequest', `Bucket is missing Object Lock Configuration (${lock}); Strata does not lock objects.`);
  requestedAcl(lookup, acl);
}

/** The same for the headers of an S3 operation (object writes and CreateBucket; others pass). */
export function refuseUnsupportedProperties(operation: string, headers: Record<string, string | string[] | undefined>): void {
  // (Reads, the most frequent requests, ask for nothing checked here.)
  if (!OBJECT_WRITES.has(operation) && !HEADER_CHECKED.has(operation)) return;
  const lookup: Lookup = (name) => {
    const v = headers[name];
    return Array.isArray(v) ? v.join(',') : v;
  };
  if (OBJECT_WRITES.has(operation)) {
    refuseUnsupportedObjectProperties(lookup);
  } else if (operation === 'PutBucketAcl' || operation === 'PutObjectAcl') {
    requestedAcl(lookup);
  } else if (operation === 'CreateBucket') {
    if (lookup('x-amz-bucket-object-lock-enabled')?.toLowerCase() === 'true')
      throw new S3Error('NotImplemented', 'Strata does not lock objects (x-amz-bucket-object-lock-enabled).');
    requestedAcl(lookup);
  }
}

/**
 * Runs each check; S3 validates a request before it refuses what it does not implement, so any other
 * refusal (a 400) wins over a NotImplemented one, whatever the order of the checks.
 */
export function invalidBeforeUnsupported(...checks: (() => void)[]): void {
  let unsupported: S3Error | undefined;
  for (const check of checks) {
    try {
      check();
    } catch (err) {
      if (!(err instanceof S3Error && err.code === 'NotImplemented')) throw err;
      unsupported ??= err;
    }
  }
  if (unsupported) throw unsupported;
}
