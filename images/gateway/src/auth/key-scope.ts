import { S3Error } from '../../../object-model/src/index.js';
import type { Caller } from '../context.js';
import { UNSET_CONFIGS, unsetConfigOperation } from '../handlers/bucket-configs.js';

/**
 * What a scoped access key may do: only reads, only in its buckets, only under their prefixes. The rule
 * is asked before any handler runs (s3Endpoint, and PostObject once its form named the key), on top of
 * what the key's parent may do (ownership and ACLs, asked of the parent by the handlers as always).
 */

/** Reads of one object: its key must lie under a prefix the scope gives for the bucket. */
const OBJECT_READS = new Set(['GetObject', 'HeadObject', 'GetObjectAcl', 'GetObjectTagging', 'GetObjectAttributes']);

/** Listings: the listing's `prefix` must lie under one the scope gives (MinIO's s3:prefix condition). */
const LISTINGS = new Set(['ListObjects', 'ListObjectsV2', 'ListObjectVersions']);

/** Reads of the bucket itself (its existence, its ACL and configurations): any scope on the bucket allows them. */
const BUCKET_READS = new Set([
  'HeadBucket',
  'GetBucketLocation',
  'GetBucketVersioning',
  'GetBucketAcl',
  'GetBucketOwnershipControls',
  'GetPublicAccessBlock',
  'GetBucketLifecycleConfiguration',
  'GetBucketCors',
  'GetBucketTagging',
  'GetBucketEncryption',
  'GetBucketLogging',
  ...UNSET_CONFIGS.map(unsetConfigOperation),
]);

function denied(why: string): S3Error {
  return new S3Error('AccessDenied', `Access Denied: this access key is scoped (${why}).`);
}

/**
 * Throws AccessDenied unless the caller's key may do `operation` on `bucket`/`key` (`listPrefix`: a
 * listing's prefix parameter). Callers without a scope (a user's own key, tokens of a login) pass.
 */
export function enforceKeyScope(caller: Caller | undefined, operation: string, bucket: string, key: string, listPrefix: string | null): void {
  const scope = caller?.scope;
  if (!scope) return;
  if (operation === 'ListBuckets') return; // the handler shows only the scope's buckets
  const resources = scope.resources.filter((r) => r.bucket === bucket);
  if (!bucket || resources.length === 0) throw denied('not for this bucket');
  if (BUCKET_READS.has(operation) && !key) return;
  if (LISTINGS.has(operation) && !key) {
    const prefix = listPrefix ?? '';
    if (resources.some((r) => prefix.startsWith(r.prefix))) return;
    throw denied('list only under the prefix it names');
  }
  if (OBJECT_READS.has(operation) && key) {
    if (resources.some((r) => key.startsWith(r.prefix))) return;
    throw denied('not for this key');
  }
  throw denied('read only');
}
