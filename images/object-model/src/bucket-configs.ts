import {
  OBJECT_OWNERSHIPS,
  PERMISSIONS,
  type Grant,
  type ObjectOwnership,
  type OwnershipRule,
  type Permission,
  type PublicAccessBlock,
} from './access-control.js';
import type { CorsRule } from './bucket-cors.js';
import type { LifecycleRule } from './bucket-lifecycle.js';
import { PARTITION_DATE_SOURCES, type LoggingRule } from './bucket-logging.js';
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
 * PutBucketTagging, PutBucketOwnershipControls, PutBucketAcl, PutPublicAccessBlock, PutBucketLogging), by the name the
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
  /** Its server access logging (one rule; none: logging off). */
  logging: LoggingRule[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isStrings = (v: unknown) => Array.isArray(v) && v.every((e) => typeof e === 'string');

/**
 * Per configuration: the outline each of its rules has, declared once. The gateway validates rules
 * against S3's schema before it sends them; the control plane checks this outline before it stores
 * them, and the gateway checks it again on what the control plane answers.
 */
export const BUCKET_CONFIG_OUTLINES: { [K in keyof BucketConfigs]: (rule: unknown) => rule is BucketConfigs[K][number] } = {
  lifecycle: (r): r is LifecycleRule =>
    isObject(r) &&
    typeof r.id === 'string' &&
    typeof r.enabled === 'boolean' &&
    isObject(r.filter) &&
    typeof r.filter.prefix === 'string' &&
    Array.isArray(r.filter.tags),
  cors: (r): r is CorsRule =>
    isObject(r) && isStrings(r.allowedOrigins) && isStrings(r.allowedMethods) && isStrings(r.allowedHeaders) && isStrings(r.exposeHeaders),
  tags: (t): t is BucketTag => isObject(t) && typeof t.key === 'string' && typeof t.value === 'string',
  ownership: (r): r is OwnershipRule => isObject(r) && OBJECT_OWNERSHIPS.includes(r.objectOwnership as ObjectOwnership),
  acl: (g): g is Grant =>
    isObject(g) &&
    PERMISSIONS.includes(g.permission as Permission) &&
    isObject(g.grantee) &&
    (typeof g.grantee.id === 'string' || typeof g.grantee.group === 'string'),
  publicAccessBlock: (b): b is PublicAccessBlock =>
    isObject(b) && ['blockPublicAcls', 'ignorePublicAcls', 'blockPublicPolicy', 'restrictPublicBuckets'].every((k) => typeof b[k] === 'boolean'),
  encryption: (r): r is EncryptionRule =>
    isObject(r) && (r.algorithm === 'AES256' || r.algorithm === 'aws:kms') && (r.kmsKeyId === undefined || typeof r.kmsKeyId === 'string'),
  logging: (r): r is LoggingRule =>
    isObject(r) &&
    typeof r.targetBucket === 'string' &&
    typeof r.targetPrefix === 'string' &&
    (r.partitionDateSource === undefined || PARTITION_DATE_SOURCES.includes(r.partitionDateSource as NonNullable<LoggingRule['partitionDateSource']>)),
};
