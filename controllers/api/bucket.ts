import { z } from 'zod';
import { commonStatus, secretKeyRef, type CustomResource } from './common.js';

export const bucketBackend = z
  .object({
    kind: z.enum(['fs', 'minio', 'cloud']).default('fs').describe('fs: the data plane volume; minio: any S3-compatible server; cloud: a cloud object store.'),
    endpoint: z.string().optional().describe('URL of the object-store server or cloud endpoint (minio, cloud).'),
    region: z.string().default('us-east-1').describe('Region for signing (minio, cloud).'),
    targetBucket: z.string().optional().describe('Bucket on the backend that holds the bytes; defaults to the bucket name.'),
    pathPrefix: z.string().optional().describe('fs: sub-directory of the data volume; minio/cloud: key prefix.'),
    useSSL: z.boolean().default(true).describe('Use TLS to reach the endpoint (minio, cloud).'),
    pathStyle: z.boolean().optional().describe('Path-style addressing (endpoint/bucket/key); defaults to true for minio, false (virtual-hosted) for cloud.'),
    accessKeySecretRef: secretKeyRef.optional().describe('Secret key holding the access key id (minio, cloud).'),
    secretKeySecretRef: secretKeyRef.optional().describe('Secret key holding the secret access key (minio, cloud).'),
  })
  .meta({
    'x-kubernetes-validations': [
      { rule: "self.kind == 'fs' || has(self.endpoint)", message: 'minio and cloud backends need an endpoint' },
      {
        rule: "self.kind == 'fs' || (has(self.accessKeySecretRef) && has(self.secretKeySecretRef))",
        message: 'minio and cloud backends need accessKeySecretRef and secretKeySecretRef',
      },
    ],
  })
  .describe('Where the bucket keeps its bytes.');

export const bucketSpec = z
  .object({
    bucketName: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/)
      .optional()
      .describe('S3 bucket name; defaults to metadata.name.'),
    backend: bucketBackend.default({ kind: 'fs', region: 'us-east-1', useSSL: true }),
    deletionPolicy: z
      .enum(['Retain', 'Delete'])
      .default('Retain')
      .describe('On deletion of this resource: Delete empties and removes the bucket, Retain keeps it.'),
  })
  .describe('A bucket in the namespace\'s Strata object store.');

export const bucketStatus = z.object({
  ...commonStatus,
  bucketName: z.string().optional(),
  endpoint: z.string().optional().describe('S3 endpoint URL of the bucket (path style).'),
  objectCount: z.number().int().optional().describe('Objects in the bucket at the last reconcile.'),
  bytes: z.number().int().optional().describe('Bytes stored in the bucket at the last reconcile.'),
});

export type BucketSpec = z.infer<typeof bucketSpec>;
export type BucketStatus = z.infer<typeof bucketStatus>;
export type Bucket = CustomResource<BucketSpec, BucketStatus>;
