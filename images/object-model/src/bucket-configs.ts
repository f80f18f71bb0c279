import type { CorsRule } from './bucket-cors.js';
import type { LifecycleRule } from './bucket-lifecycle.js';
import type { BucketTag } from './tags.js';

/**
 * The configurations a bucket keeps with its record (PutBucketLifecycleConfiguration, PutBucketCors,
 * PutBucketTagging), by the name the control plane's API gives each (`/internal/buckets/:bucket/<name>`).
 */
export interface BucketConfigs {
  lifecycle: LifecycleRule[];
  cors: CorsRule[];
  tags: BucketTag[];
}
