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
 * PutBucketTagging), by the name the control plane's API gives each (`/internal/buckets/:bucket/<name>`).
 */
export interface BucketConfigs {
  lifecycle: LifecycleRule[];
  cors: CorsRule[];
  tags: BucketTag[];
  encryption: EncryptionRule[];
}
