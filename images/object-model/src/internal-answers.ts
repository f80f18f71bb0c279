import { z } from 'zod';
import type { AdminJob } from './admin-jobs.js';
import { BUCKET_CONFIG_OUTLINES, type BucketConfigs } from './bucket-configs.js';
import type { KeyScope, ScopedKeyCredentials } from './key-scope.js';
import { SSE_ANSWER } from './object-encryption.js';
import type {
  BucketInfo,
  BucketListing,
  DeleteObjectsResult,
  ListObjectsResult,
  ListPartsResult,
  ListUploadsResult,
  NamedChecksum,
  ObjectMeta,
  PutObjectResult,
  StoredPart,
  UploadChecksum,
} from './object-layer.js';
import { S3Error } from './s3-errors.js';

/**
 * The answers of the data plane's and the control plane's internal APIs, declared once: the gateway
 * reads every JSON answer through one of these before it uses it (never a cast), so an answer of the
 * wrong shape is an InternalError that names the field, not an `undefined` flowing on. Each schema is
 * checked against the object layer's type (`satisfies z.ZodType<T>`). Objects are loose: fields an
 * answer carries beyond its type (a bucket's stats) pass on untouched.
 */

/** Reads one answer: its value as T, or a ZodError (InternalHttp turns it into InternalError). */
export type AnswerSchema<T> = z.ZodType<T>;

const STRINGS = z.record(z.string(), z.string());
const TAG = z.looseObject({ key: z.string(), value: z.string() });
const COUNT = z.number().int().nonnegative();
const NAMED_CHECKSUM = z.looseObject({ algorithm: z.string(), value: z.string() }) satisfies z.ZodType<NamedChecksum>;
/** ISO 8601 time text. */
const TIME = z.string().refine((t) => !Number.isNaN(Date.parse(t)), 'not a time');

/** An answer with no body the caller needs (204, or one it ignores). */
export const NO_ANSWER: AnswerSchema<void> = z.unknown().transform(() => undefined);

export const OBJECT_META_ANSWER = z.looseObject({
  bucket: z.string(),
  key: z.string(),
  size: COUNT,
  etag: z.string(),
  md5: z.string().nullable(),
  contentType: z.string(),
  userMetadata: STRINGS,
  lastModified: TIME,
  tags: z.array(TAG).optional(),
  headers: STRINGS.optional(),
  sse: SSE_ANSWER.optional(),
}) satisfies z.ZodType<ObjectMeta>;

const BACKEND_REF = z.looseObject({ kind: z.string() });

export const BUCKET_LISTING_ANSWER = z.looseObject({
  buckets: z.array(z.looseObject({ name: z.string(), createdAt: TIME, backend: BACKEND_REF })),
}) satisfies z.ZodType<{ buckets: BucketListing[] }>;

/** A list of a bucket configuration's rules, each of its outline. */
const rulesOf = <K extends keyof BucketConfigs>(kind: K) => z.array(z.custom<BucketConfigs[K][number]>(BUCKET_CONFIG_OUTLINES[kind], `not a ${kind} rule`));

export const BUCKET_INFO_ANSWER = z.looseObject({
  name: z.string(),
  owner: z.string(),
  createdAt: TIME,
  backend: BACKEND_REF,
  lifecycle: rulesOf('lifecycle').optional(),
  cors: rulesOf('cors').optional(),
  ownership: rulesOf('ownership').optional(),
  acl: rulesOf('acl').optional(),
  publicAccessBlock: rulesOf('publicAccessBlock').optional(),
  logging: rulesOf('logging').optional(),
}) satisfies z.ZodType<BucketInfo>;

/** GET /buckets/:bucket/<kind>: `{rules}`, each rule of that configuration's outline. */
const BUCKET_CONFIG_ANSWERS: { [K in keyof BucketConfigs]: AnswerSchema<{ rules: BucketConfigs[K] }> } = {
  lifecycle: z.looseObject({ rules: rulesOf('lifecycle') }),
  cors: z.looseObject({ rules: rulesOf('cors') }),
  tags: z.looseObject({ rules: rulesOf('tags') }),
  ownership: z.looseObject({ rules: rulesOf('ownership') }),
  acl: z.looseObject({ rules: rulesOf('acl') }),
  publicAccessBlock: z.looseObject({ rules: rulesOf('publicAccessBlock') }),
  encryption: z.looseObject({ rules: rulesOf('encryption') }),
  logging: z.looseObject({ rules: rulesOf('logging') }),
};

export function bucketConfigAnswer<K extends keyof BucketConfigs>(kind: K): AnswerSchema<{ rules: BucketConfigs[K] }> {
  return BUCKET_CONFIG_ANSWERS[kind];
}

export const LIST_OBJECTS_ANSWER = z.looseObject({
  objects: z.array(OBJECT_META_ANSWER),
  commonPrefixes: z.array(z.string()),
  isTruncated: z.boolean(),
  nextContinuationToken: z.string().optional(),
  nextMarker: z.string().optional(),
}) satisfies z.ZodType<ListObjectsResult>;

export const OBJECT_PARTS_ANSWER = z.looseObject({
  parts: z.array(z.looseObject({ partNumber: COUNT, size: COUNT, checksum: z.string().optional() })),
}) satisfies z.ZodType<{ parts: StoredPart[] }>;

export const DELETE_OBJECTS_ANSWER = z.looseObject({
  deleted: z.array(z.string()),
  errors: z.array(z.looseObject({ key: z.string(), code: z.string(), message: z.string() })),
}) satisfies z.ZodType<DeleteObjectsResult>;

const KEY_SCOPE = z.looseObject({
  access: z.literal('read'),
  resources: z.array(z.looseObject({ bucket: z.string(), prefix: z.string() })),
}) satisfies z.ZodType<KeyScope>;

/** A user's (or a scoped key's: then `username` is its parent's, and `scope` its limits) signing secret. */
export const USER_CREDENTIALS_ANSWER = z.looseObject({
  username: z.string(),
  accessKey: z.string(),
  secretKey: z.string(),
  scope: KEY_SCOPE.optional(),
  email: z.string().optional(),
});

export const SCOPED_KEY_ANSWER = z.looseObject({
  accessKey: z.string(),
  secretKey: z.string(),
  parent: z.string(),
  scope: KEY_SCOPE,
}) satisfies z.ZodType<ScopedKeyCredentials>;

export const SCOPED_KEYS_ANSWER = z.looseObject({
  keys: z.array(z.looseObject({ accessKey: z.string(), parent: z.string(), scope: KEY_SCOPE, createdAt: TIME, name: z.string().optional() })),
});
export const VERIFIED_USER_ANSWER = z.looseObject({ username: z.string(), accessKey: z.string() });
/** A user as the admin API shows one (never its secrets): its e-mail address when it has one. */
export const USER_ANSWER = z.looseObject({ username: z.string(), email: z.string().optional() });

export const RECYCLE_BIN_ANSWER = z.looseObject({
  objects: z.array(z.looseObject({ id: z.union([z.string(), z.number()]), bucket: z.string(), key: z.string(), size: COUNT, recycledAt: TIME })),
  nextToken: z.string().optional(),
});

export const ADMIN_JOB_ANSWER = z.looseObject({
  id: z.string(),
  kind: z.string(),
  state: z.enum(['running', 'succeeded', 'failed']),
  startedAt: TIME,
  finishedAt: TIME.optional(),
  result: z.unknown().optional(),
  error: z.looseObject({ code: z.string(), message: z.string() }).optional(),
}) satisfies z.ZodType<AdminJob>;

// The data plane's answers.

export const PUT_OBJECT_ANSWER = z.looseObject({ object: OBJECT_META_ANSWER, instant: z.boolean() }) satisfies z.ZodType<PutObjectResult>;

export const DIRECT_URL_ANSWER = z.looseObject({ url: z.string() });

export const CREATE_MULTIPART_ANSWER = z.looseObject({
  uploadId: z.string().min(1),
  checksum: z.looseObject({ algorithm: z.string(), type: z.enum(['COMPOSITE', 'FULL_OBJECT']) }).optional(),
  sse: SSE_ANSWER.optional(),
}) satisfies z.ZodType<{ uploadId: string; checksum?: Required<UploadChecksum> }>;

export const UPLOAD_PART_ANSWER = z.looseObject({ etag: z.string() });

export const UPLOAD_PART_COPY_ANSWER = z.looseObject({ etag: z.string(), lastModified: TIME, checksum: NAMED_CHECKSUM.optional() });

export const LIST_PARTS_ANSWER = z.looseObject({
  parts: z.array(z.looseObject({ partNumber: COUNT, etag: z.string(), size: COUNT, lastModified: TIME, checksum: z.string().optional() })),
  isTruncated: z.boolean(),
  nextPartNumberMarker: COUNT.optional(),
  initiated: TIME,
  owner: z.string(),
  anonymous: z.boolean().optional(),
  checksumAlgorithm: z.string().optional(),
  checksumType: z.string().optional(),
}) satisfies z.ZodType<ListPartsResult>;

export const LIST_UPLOADS_ANSWER = z.looseObject({
  uploads: z.array(z.looseObject({ key: z.string(), uploadId: z.string(), initiated: TIME, owner: z.string() })),
  commonPrefixes: z.array(z.string()).optional(),
  isTruncated: z.boolean(),
  nextKeyMarker: z.string().optional(),
  nextUploadIdMarker: z.string().optional(),
}) satisfies z.ZodType<ListUploadsResult>;

// The data plane's answers to the control plane (purge/data-plane-gc.ts).

/** POST /internal/blobs/gc: how many blobs' bytes it freed. */
export const BLOBS_FREED_ANSWER = z.looseObject({ freed: COUNT });

/** The multipart expiries: how many uploads it aborted. */
export const UPLOADS_ABORTED_ANSWER = z.looseObject({ aborted: COUNT });

/**
 * `value` read by `schema`; an answer of another shape is InternalError (500: the upstream broke the
 * contract, nothing the client did), naming `what` answered and the first field that is wrong.
 */
export function readAnswer<T>(schema: AnswerSchema<T>, value: unknown, what: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue?.path.length ? issue.path.join('.') : 'the body';
  throw new S3Error('InternalError', `${what} gave a malformed answer (${field}: ${issue?.message ?? 'invalid'})`);
}
