import { S3Error } from '../../../object-model/src/index.js';

/**
 * Properties a write may ask for that Strata cannot give: a storage class other than the one it has,
 * object lock (retention, legal hold), and access for anyone but the owner (public canned ACLs, grants).
 * A write asking for one is refused before any byte is stored instead of being stored without it: a
 * client that asked for a WORM retention or a public object must not believe it has one. What every
 * object here already is — STANDARD, private to its owner — is accepted, so clients that always send
 * `x-amz-acl: private` or `x-amz-storage-class: STANDARD` work.
 */
/** Header-carried object writes (PostObject's fields are checked by its handler). */
const OBJECT_WRITES = new Set(['PutObject', 'CopyObject', 'CreateMultipartUpload']);

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

const CANNED_ACLS = new Set([
  'private',
  'public-read',
  'public-read-write',
  'authenticated-read',
  'aws-exec-read',
  'bucket-owner-read',
  'bucket-owner-full-control',
  'log-delivery-write',
]);
/** Canned ACLs that give no one but the owner (of the object and of its bucket: one account here) any access. */
const OWNER_ONLY_ACLS = new Set(['private', 'bucket-owner-read', 'bucket-owner-full-control']);

const GRANTS = ['x-amz-grant-read', 'x-amz-grant-write', 'x-amz-grant-read-acp', 'x-amz-grant-write-acp', 'x-amz-grant-full-control'];
const OBJECT_LOCK = ['x-amz-object-lock-mode', 'x-amz-object-lock-retain-until-date', 'x-amz-object-lock-legal-hold'];

/** A header's or form field's value by lower-case name. */
type Lookup = (name: string) => string | undefined;

function checkAcl(acl: string | undefined, lookup: Lookup): void {
  if (acl !== undefined) {
    if (!CANNED_ACLS.has(acl)) throw new S3Error('InvalidArgument', `${acl} is not a canned ACL.`, { ArgumentName: 'x-amz-acl', ArgumentValue: acl });
    if (!OWNER_ONLY_ACLS.has(acl))
      throw new S3Error('NotImplemented', `Strata keeps buckets and objects private to their owner; the canned ACL ${acl} is not supported.`);
  }
  const grant = GRANTS.find((name) => lookup(name) !== undefined);
  if (grant) throw new S3Error('NotImplemented', `Strata keeps buckets and objects private to their owner; ${grant} is not supported.`);
}

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
  checkAcl(acl, lookup);
}

/** The same for the headers of an S3 operation (object writes and CreateBucket; others pass). */
export function refuseUnsupportedProperties(operation: string, headers: Record<string, string | string[] | undefined>): void {
  const lookup: Lookup = (name) => {
    const v = headers[name];
    return Array.isArray(v) ? v.join(',') : v;
  };
  if (OBJECT_WRITES.has(operation)) {
    refuseUnsupportedObjectProperties(lookup);
  } else if (operation === 'PutBucketAcl' || operation === 'PutObjectAcl') {
    // Refused as NotImplemented by their handler, after S3's own check of the canned ACL.
    const acl = lookup('x-amz-acl');
    if (acl !== undefined && !CANNED_ACLS.has(acl)) checkAcl(acl, lookup);
  } else if (operation === 'CreateBucket') {
    if (lookup('x-amz-bucket-object-lock-enabled')?.toLowerCase() === 'true')
      throw new S3Error('NotImplemented', 'Strata does not lock objects (x-amz-bucket-object-lock-enabled).');
    checkAcl(lookup('x-amz-acl'), lookup);
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
