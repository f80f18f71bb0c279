/**
 * The operation field of an S3 server access-log line: `REST.<method>.<resource>`, as S3 writes it
 * (REST.GET.OBJECT, REST.PUT.PART, REST.POST.MULTI_OBJECT_DELETE...). Keyed by the gateway's operation name.
 */
const RESOURCES: Record<string, string> = {
  GetObject: 'OBJECT',
  HeadObject: 'OBJECT',
  PutObject: 'OBJECT',
  CopyObject: 'OBJECT',
  DeleteObject: 'OBJECT',
  PostObject: 'OBJECT',
  GetObjectAttributes: 'OBJECT_ATTRIBUTES',
  DeleteObjects: 'MULTI_OBJECT_DELETE',
  ListObjects: 'BUCKET',
  ListObjectsV2: 'BUCKET',
  ListObjectVersions: 'BUCKETVERSIONS',
  CreateBucket: 'BUCKET',
  DeleteBucket: 'BUCKET',
  HeadBucket: 'BUCKET',
  GetBucketLocation: 'LOCATION',
  GetBucketVersioning: 'VERSIONING',
  GetBucketAcl: 'ACL',
  PutBucketAcl: 'ACL',
  GetObjectAcl: 'ACL',
  PutObjectAcl: 'ACL',
  GetBucketLogging: 'LOGGING_STATUS',
  PutBucketLogging: 'LOGGING_STATUS',
  GetBucketTagging: 'TAGGING',
  PutBucketTagging: 'TAGGING',
  DeleteBucketTagging: 'TAGGING',
  GetObjectTagging: 'OBJECT_TAGGING',
  PutObjectTagging: 'OBJECT_TAGGING',
  DeleteObjectTagging: 'OBJECT_TAGGING',
  GetBucketLifecycleConfiguration: 'LIFECYCLE',
  PutBucketLifecycleConfiguration: 'LIFECYCLE',
  DeleteBucketLifecycle: 'LIFECYCLE',
  GetBucketCors: 'CORS',
  PutBucketCors: 'CORS',
  DeleteBucketCors: 'CORS',
  GetBucketEncryption: 'ENCRYPTION',
  PutBucketEncryption: 'ENCRYPTION',
  DeleteBucketEncryption: 'ENCRYPTION',
  GetBucketOwnershipControls: 'OWNERSHIP_CONTROLS',
  PutBucketOwnershipControls: 'OWNERSHIP_CONTROLS',
  DeleteBucketOwnershipControls: 'OWNERSHIP_CONTROLS',
  GetPublicAccessBlock: 'PUBLIC_ACCESS_BLOCK',
  PutPublicAccessBlock: 'PUBLIC_ACCESS_BLOCK',
  DeletePublicAccessBlock: 'PUBLIC_ACCESS_BLOCK',
  CreateMultipartUpload: 'UPLOADS',
  ListMultipartUploads: 'UPLOADS',
  UploadPart: 'PART',
  UploadPartCopy: 'PART',
  CompleteMultipartUpload: 'UPLOAD',
  AbortMultipartUpload: 'UPLOAD',
  ListParts: 'UPLOAD',
};

/** S3's method word: copies are COPY (CopyObject, UploadPartCopy), the rest the HTTP method. */
const COPIES = new Set(['CopyObject', 'UploadPartCopy']);

/** `REST.<METHOD>.<RESOURCE>`; an operation without an entry is named by the request (OBJECT with a key, BUCKET without). */
export function logOperation(operation: string, method: string, hasKey: boolean): string {
  const resource = RESOURCES[operation] ?? (hasKey ? 'OBJECT' : 'BUCKET');
  return `REST.${COPIES.has(operation) ? 'COPY' : method.toUpperCase()}.${resource}`;
}
