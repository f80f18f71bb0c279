import { z } from 'zod';
import { commonStatus, secretKeyRef, type CustomResource } from './common.js';

/** A CEL transition rule: the field keeps the value it was created with (the reconciler checks the same). */
const IMMUTABLE = (field: string, why: string) => ({ rule: 'self == oldSelf', message: `${field} cannot be changed: ${why}` });

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
      IMMUTABLE('spec.backend', 'the bytes stay where the bucket was created'),
    ],
  })
  .describe('Where the bucket keeps its bytes.');

const LIFECYCLE_ACTIONS = ['expirationDays', 'expirationDate', 'abortIncompleteMultipartUploadDays'] as const;

export const bucketLifecycleRule = z
  .object({
    id: z.string().min(1).max(255).describe('Rule name, unique within the bucket.'),
    enabled: z.boolean().default(true).describe('A disabled rule is kept but not applied.'),
    prefix: z.string().max(1024).default('').describe('Objects (and multipart uploads) whose key starts with this; empty: all of them.'),
    expirationDays: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Objects expire this many days after they were written (at the next midnight UTC) and go to the recycle bin.'),
    expirationDate: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}$/)
      .optional()
      .describe('From this day on (YYYY-MM-DD, 00:00 UTC) every object the rule selects expires, however new.'),
    abortIncompleteMultipartUploadDays: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Multipart uploads still incomplete this many days after they began are aborted.'),
  })
  .meta({
    'x-kubernetes-validations': [
      { rule: '!(has(self.expirationDays) && has(self.expirationDate))', message: 'a rule expires objects by expirationDays or by expirationDate, not both' },
      {
        rule: LIFECYCLE_ACTIONS.map((a) => `has(self.${a})`).join(' || '),
        message: 'a rule needs an action: expirationDays, expirationDate or abortIncompleteMultipartUploadDays',
      },
    ],
  })
  .superRefine((rule, ctx) => {
    if (rule.expirationDays !== undefined && rule.expirationDate !== undefined)
      ctx.addIssue({ code: 'custom', message: `lifecycle rule ${rule.id}: expirationDays or expirationDate, not both` });
    if (LIFECYCLE_ACTIONS.every((a) => rule[a] === undefined)) ctx.addIssue({ code: 'custom', message: `lifecycle rule ${rule.id} needs an action` });
    if (rule.expirationDate !== undefined && Number.isNaN(Date.parse(`${rule.expirationDate}T00:00:00Z`)))
      ctx.addIssue({ code: 'custom', message: `lifecycle rule ${rule.id}: expirationDate is not a date` });
  })
  .describe('One lifecycle rule of the bucket (S3 lifecycle configuration, applied daily at 03:00).');
export type BucketLifecycleRule = z.infer<typeof bucketLifecycleRule>;

export const bucketCorsRule = z
  .object({
    id: z.string().max(255).optional().describe('Rule name.'),
    allowedOrigins: z
      .array(
        z
          .string()
          .min(1)
          .regex(/^[^*]*\*?[^*]*$/),
      )
      .min(1)
      .describe('Origins allowed, each with at most one * wildcard ("*": any origin).'),
    allowedMethods: z
      .array(z.enum(['GET', 'PUT', 'HEAD', 'POST', 'DELETE']))
      .min(1)
      .describe('Methods allowed.'),
    allowedHeaders: z
      .array(
        z
          .string()
          .min(1)
          .regex(/^[^*]*\*?[^*]*$/),
      )
      .default([])
      .describe('Request headers a preflight may ask for, each with at most one * wildcard.'),
    exposeHeaders: z.array(z.string().min(1)).default([]).describe('Answer headers the page may read (e.g. ETag).'),
    maxAgeSeconds: z.number().int().min(0).max(999_999_999).optional().describe('How long browsers may cache a preflight answer.'),
  })
  .describe('One CORS rule of the bucket (S3 CORSRule); the first rule that allows a browser request answers it.');
export type BucketCorsRule = z.infer<typeof bucketCorsRule>;

export const bucketSpec = z
  .object({
    bucketName: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/)
      .meta({ 'x-kubernetes-validations': [IMMUTABLE('spec.bucketName', 'a new name would leave the old bucket behind')] })
      .optional()
      .describe('S3 bucket name; defaults to metadata.name. Cannot be changed.'),
    backend: bucketBackend.default({ kind: 'fs', region: 'us-east-1', useSSL: true }),
    deletionPolicy: z
      .enum(['Retain', 'Delete'])
      .default('Retain')
      .describe('On deletion of this resource: Delete empties and removes the bucket, Retain keeps it.'),
    lifecycle: z
      .object({
        rules: z
          .array(bucketLifecycleRule)
          .max(1000)
          .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['id'] })
          .superRefine((rules, ctx) => {
            const ids = rules.map((r) => r.id);
            if (new Set(ids).size !== ids.length) ctx.addIssue({ code: 'custom', message: 'lifecycle rule ids must be unique' });
          })
          .describe("The rules; an empty list removes the bucket's rules."),
      })
      .optional()
      .describe(
        "Lifecycle rules of the bucket. Set, the operator keeps the bucket's rules equal to these (rules set through the S3 API are replaced); unset, " +
          "the bucket's rules are left as they are.",
      ),
    cors: z
      .object({
        rules: z
          .array(bucketCorsRule)
          .max(100)
          .describe("The rules; an empty list removes the bucket's rules (the gateway's server-wide CORS policy applies again)."),
      })
      .optional()
      .describe(
        "CORS rules of the bucket, for browser applications. Set, the operator keeps the bucket's rules equal to these; unset, they are left as they are.",
      ),
  })
  .meta({
    'x-kubernetes-validations': [
      { rule: 'has(self.bucketName) == has(oldSelf.bucketName)', message: 'spec.bucketName cannot be set or removed after creation' },
    ],
  })
  .describe("A bucket in the namespace's Strata object store.");

export const bucketStatus = z.object({
  ...commonStatus,
  bucketName: z.string().optional(),
  endpoint: z.string().optional().describe('S3 endpoint URL of the bucket (path style).'),
  objectCount: z.number().int().optional().describe('Objects in the bucket at the last reconcile.'),
  bytes: z.number().int().optional().describe('Bytes stored in the bucket at the last reconcile.'),
  backingProviders: z
    .object({ postgres: z.enum(['statefulset', 'cloudnative-pg']), rabbitmq: z.enum(['statefulset', 'rabbitmq-operator']) })
    .optional()
    .describe("Who runs the stack's bundled PostgreSQL and RabbitMQ: chosen once per namespace and kept."),
});

export type BucketSpec = z.infer<typeof bucketSpec>;
export type BucketStatus = z.infer<typeof bucketStatus>;
export type Bucket = CustomResource<BucketSpec, BucketStatus>;
