import type { Grant, OwnershipRule, PublicAccessBlock } from './access-control.js';
import type { CorsRule } from './bucket-cors.js';
import type { LifecycleRule } from './bucket-lifecycle.js';
import type { BucketTag } from './tags.js';

/**
 * A bucket's default encryption (PutBucketEncryption's ServerSideEncryptionConfiguration Rule): objects
 * written without encryption headers get it.
 */
export interface EncryptionRule {
  algorithm: 'AES256' | 'aws:kms';
  kmsKeyId?: string;
  bucketKeyEnabled?: boolean;
}

/**
 * The configurations a bucket keeps with its record (PutBucketLifecycleConfiguration, PutBucketCors,
 * PutBucketTagging, PutBucketOwnershipControls, PutBucketAcl, PutPublicAccessBlock), by the name the
 * control plane's API gives each (`/internal/buckets/:bucket/<name>`).
 */
export interface BucketConfigs {
  lifecycle: LifecycleRule[];
  cors: CorsRule[];
  tags: BucketTag[];
  /** One rule. A bucket is made with BucketOwnerEnforced; without one (deleted) it is ObjectWriter, as S3. */
  ownership: OwnershipRule[];
  /** The bucket's grants (its owner's own included); none: private to its owner. */
  acl: Grant[];
  /** One block. */
  publicAccessBlock: PublicAccessBlock[];
  /** The bucket's default encryption (one rule). */
  encryption: EncryptionRule[];
}
