import { z } from 'zod';
import { CHECKSUM_ALGORITHMS, isChecksumAlgorithm, multipartChecksumTypes, type ChecksumAlgorithm } from './checksum-algorithms.js';
import type { EncryptionRule } from './bucket-configs.js';
import { asciiJson } from './internal-api.js';
import { definedConditions } from './preconditions.js';
import { S3Error, type S3ErrorCode } from './s3-errors.js';
import { storedHeadersFromJson, type StoredHeaders } from './stored-headers.js';
import { checkTagSet, objectTagsFromJson, type Tag } from './tags.js';

/**
 * The data plane's internal headers that carry an object's properties as JSON — on a PUT from the
 * gateway and on a GET's answer to it — declared once: the gateway's client writes them with
 * `encodeWireHeader`, the data plane's routes read them with `readWireHeader`, and the gateway reads the
 * answer's with `readWireHeaderLeniently`.
 */
export interface WireHeader<T> {
  name: string;
  schema: z.ZodType<T>;
  /** The S3 error a value that is not `shape` is. */
  code: S3ErrorCode;
  shape: string;
}

/** x-strata-meta: the object's user metadata (names lower-cased). */
export const USER_METADATA_HEADER: WireHeader<Record<string, string>> = {
  name: 'x-strata-meta',
  schema: z.record(z.string(), z.string()).transform((meta) => Object.fromEntries(Object.entries(meta).map(([k, v]) => [k.toLowerCase(), v]))),
  code: 'InvalidArgument',
  shape: 'a JSON object of strings',
};

/** x-strata-tags: the object's tags, checked as S3 checks a tag set. */
export const TAGS_HEADER: WireHeader<Tag[]> = {
  name: 'x-strata-tags',
  schema: z.array(z.object({ key: z.string(), value: z.string() })).transform((tags) => checkTagSet(tags, 'object')),
  code: 'InvalidTag',
  shape: 'a JSON list of {key, value}',
};

/** x-strata-headers: the stored headers known before the body (Cache-Control, ..., a checksum sent as a header); none when empty. */
export const STORED_HEADERS_HEADER: WireHeader<StoredHeaders | undefined> = {
  name: 'x-strata-headers',
  schema: z.record(z.string(), z.string()).transform((h) => storedHeadersFromJson(h)),
  code: 'InvalidArgument',
  shape: 'a JSON object of strings',
};

/** x-strata-trailing-headers (a trailer): the stored headers known once the body has arrived (a trailer checksum). */
export const TRAILING_HEADERS_TRAILER: WireHeader<StoredHeaders | undefined> = { ...STORED_HEADERS_HEADER, name: 'x-strata-trailing-headers' };

/**
 * x-strata-anonymous: `true` on a write no account signed (a bucket granting AllUsers WRITE admitted it;
 * its owner is the bucket owner's). Such a write lands only in the bucket that admitted it, never in one
 * of the name created again since.
 */
export const ANONYMOUS_WRITE_HEADER: WireHeader<boolean> = {
  name: 'x-strata-anonymous',
  schema: z.boolean(),
  code: 'InvalidArgument',
  shape: 'true or false',
};

/** The bucket a write goes to, as the gateway resolved it: its row, owner, backend and default encryption. */
export interface ResolvedBucket {
  id: number;
  name: string;
  owner: string;
  backend: { kind: string; [setting: string]: unknown };
  encryption?: EncryptionRule[];
}

/**
 * x-strata-bucket: the bucket record the gateway resolved and authorised the request against (one
 * resolution per request: the data plane writes to that bucket instead of resolving the name again).
 */
export const BUCKET_HEADER: WireHeader<ResolvedBucket> = {
  name: 'x-strata-bucket',
  schema: z.object({
    id: z.number().int().positive(),
    name: z.string(),
    owner: z.string(),
    backend: z.looseObject({ kind: z.string() }),
    encryption: z
      .array(z.object({ algorithm: z.enum(['AES256', 'aws:kms']), kmsKeyId: z.string().optional(), bucketKeyEnabled: z.boolean().optional() }))
      .optional(),
  }),
  code: 'InvalidArgument',
  shape: 'a JSON bucket record {id, name, owner, backend, encryption?}',
};

/** x-strata-source-bucket: as x-strata-bucket, the record of a copy's source bucket the gateway authorised the read of. */
export const SOURCE_BUCKET_HEADER: WireHeader<ResolvedBucket> = { ...BUCKET_HEADER, name: 'x-strata-source-bucket' };

/** The header's value as sent: ASCII JSON (non-ASCII characters as \u escapes, as headers need). */
export function encodeWireHeader<T>(_header: WireHeader<T>, value: NonNullable<T>): string {
  return asciiJson(value);
}

/** The header's value, checked; undefined when absent or empty. A value that is not its shape is its S3 error. */
export function readWireHeader<T>(header: WireHeader<T>, raw: string | string[] | undefined): T | undefined {
  if (raw === undefined || raw === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Array.isArray(raw) ? raw.join(',') : raw);
  } catch {
    throw new S3Error(header.code, `${header.name} must be ${header.shape}`);
  }
  const result = header.schema.safeParse(parsed);
  if (!result.success) throw new S3Error(header.code, `${header.name} must be ${header.shape}`);
  return result.data;
}

/** As readWireHeader, for properties a reader only passes on: a malformed value is left out rather than failing the read. */
export function readWireHeaderLeniently<T>(header: WireHeader<T>, raw: string | string[] | undefined): T | undefined {
  try {
    return readWireHeader(header, raw);
  } catch {
    return undefined;
  }
}

/** Text in an internal JSON body that may be absent; anything but a string counts as absent. */
const optionalText = z.string().optional().catch(undefined);

/** A read's or a copy source's conditions in an internal JSON body (`conditions`); none when it names none. */
export const OBJECT_CONDITIONS_BODY = z
  .object({ ifMatch: optionalText, ifNoneMatch: optionalText, ifModifiedSince: optionalText, ifUnmodifiedSince: optionalText })
  .catch({})
  .transform(definedConditions);

/** A write's conditions on the object it replaces in an internal JSON body; none when it names none. */
export const WRITE_CONDITIONS_BODY = z.object({ ifMatch: optionalText, ifNoneMatch: optionalText }).catch({}).transform(definedConditions);

/** A checksum with its algorithm's name in an internal JSON body; none unless both are strings. */
export const NAMED_CHECKSUM_BODY = z.object({ algorithm: z.string(), value: z.string() }).optional().catch(undefined);

const directive = z.enum(['COPY', 'REPLACE']).optional();

/** CopyObject's internal JSON body (the gateway's CopyObjectInput), as the data plane reads it. */
export const COPY_OBJECT_BODY = z.object({
  owner: optionalText,
  anonymous: z.boolean().optional(),
  sourceBucket: z.string(),
  sourceKey: z.string(),
  metadataDirective: directive,
  contentType: optionalText,
  userMetadata: z.record(z.string(), z.string()).optional(),
  headers: z.unknown().optional().transform(storedHeadersFromJson),
  taggingDirective: directive,
  tags: z.unknown().optional().transform(objectTagsFromJson),
  checksumAlgorithm: z.enum(CHECKSUM_ALGORITHMS).optional(),
  conditions: OBJECT_CONDITIONS_BODY,
  destinationConditions: WRITE_CONDITIONS_BODY,
});

/** The S3 error of each COPY_OBJECT_BODY field a body gets wrong. */
const COPY_OBJECT_BODY_ERRORS: Record<string, () => S3Error> = {
  sourceBucket: () => new S3Error('InvalidArgument', 'sourceBucket and sourceKey are required'),
  sourceKey: () => new S3Error('InvalidArgument', 'sourceBucket and sourceKey are required'),
  metadataDirective: () => new S3Error('InvalidArgument', 'metadataDirective must be COPY or REPLACE', { ArgumentName: 'x-amz-metadata-directive' }),
  taggingDirective: () => new S3Error('InvalidArgument', 'taggingDirective must be COPY or REPLACE', { ArgumentName: 'x-amz-tagging-directive' }),
  checksumAlgorithm: () => new S3Error('InvalidRequest', `checksumAlgorithm must be one of ${CHECKSUM_ALGORITHMS.join(', ')}`),
};

/**
 * A reader of one internal JSON body: the value checked by `schema`, or the S3 error `errors` names for
 * its first wrong field (in the schema's order), InvalidArgument for any other.
 */
export function bodyReader<S extends z.ZodType>(schema: S, errors: Record<string, () => S3Error>, what: string): (value: unknown) => z.output<S> {
  return (value) => {
    const result = schema.safeParse(value ?? {});
    if (result.success) return result.data;
    const field = String(result.error.issues[0]?.path[0] ?? '');
    throw errors[field]?.() ?? new S3Error('InvalidArgument', `${field} is not valid in ${what}`);
  };
}

/** A CopyObject body, checked. */
export const readCopyObjectBody = bodyReader(COPY_OBJECT_BODY, COPY_OBJECT_BODY_ERRORS, 'a copy request');

/** A multipart upload's checksum as CreateMultipartUpload names it: the algorithm's default type unless one is named. */
function uploadChecksum(value: unknown): { algorithm: ChecksumAlgorithm; type: 'COMPOSITE' | 'FULL_OBJECT' } | undefined {
  if (value === undefined || value === null) return undefined;
  const { algorithm, type } = value as { algorithm?: unknown; type?: unknown };
  if (typeof algorithm !== 'string' || !isChecksumAlgorithm(algorithm))
    throw new S3Error('InvalidRequest', 'Value for x-amz-checksum-algorithm header is invalid.');
  const allowed = multipartChecksumTypes(algorithm);
  const chosen = type === undefined ? allowed[0]! : type;
  if (chosen !== 'COMPOSITE' && chosen !== 'FULL_OBJECT') throw new S3Error('InvalidRequest', 'Value for x-amz-checksum-type header is invalid.');
  if (!allowed.includes(chosen))
    throw new S3Error('InvalidRequest', `The ${chosen} checksum type cannot be used with the ${algorithm.toLowerCase()} checksum algorithm.`);
  return { algorithm, type: chosen };
}

/** CreateMultipartUpload's internal JSON body (the gateway's CreateMultipartInput), as the data plane reads it. */
export const readCreateMultipartBody = bodyReader(
  z.object({
    owner: optionalText,
    anonymous: z.boolean().optional(),
    contentType: optionalText,
    userMetadata: z.record(z.string(), z.string()).optional(),
    tags: z.unknown().optional().transform(objectTagsFromJson),
    headers: z.unknown().optional().transform(storedHeadersFromJson),
    checksum: z.unknown().optional().transform(uploadChecksum),
  }),
  {},
  'a multipart upload',
);

/** UploadPartCopy's internal JSON body (the gateway's UploadPartCopyInput). */
export const readPartCopyBody = bodyReader(
  z.object({ sourceBucket: z.string(), sourceKey: z.string(), range: optionalText, conditions: OBJECT_CONDITIONS_BODY }),
  { sourceBucket: COPY_OBJECT_BODY_ERRORS.sourceBucket!, sourceKey: COPY_OBJECT_BODY_ERRORS.sourceKey! },
  'a part copy',
);

/** One part a CompleteMultipartUpload names; its number and ETag are judged against the stored parts. */
export interface RequestedPart {
  partNumber: number;
  etag: string;
  checksum?: { algorithm: string; value: string };
}

/**
 * CompleteMultipartUpload's internal JSON body. `parts` that is no list is passed on as it is: the upload
 * judges it (MalformedXML) after a retried Complete has been recognised.
 */
export const readCompleteMultipartBody = bodyReader(
  z.object({
    parts: z.unknown().transform((parts) =>
      Array.isArray(parts)
        ? parts.map(
            (r: Record<string, unknown> | null): RequestedPart => ({
              partNumber: Number(r?.partNumber),
              etag: String(r?.etag ?? ''),
              checksum: NAMED_CHECKSUM_BODY.parse(r?.checksum),
            }),
          )
        : (parts as RequestedPart[]),
    ),
    conditions: WRITE_CONDITIONS_BODY,
    checksum: NAMED_CHECKSUM_BODY,
    anonymous: z.boolean().optional(),
  }),
  {},
  'a multipart completion',
);

const EXPIRY_REQUIRED = () => new S3Error('InvalidArgument', 'prefix (a string) and initiatedNoLaterThan (an ISO 8601 time) are required');

/** A lifecycle rule's AbortIncompleteMultipartUpload, as the control plane asks it of the data plane. */
export const readMultipartExpiryBody = bodyReader(
  z.object({
    prefix: z
      .string()
      .nullish()
      .transform((p) => p ?? ''),
    initiatedNoLaterThan: z
      .unknown()
      .transform((t) => new Date(String(t)))
      .refine((d) => !Number.isNaN(d.getTime())),
  }),
  { prefix: EXPIRY_REQUIRED, initiatedNoLaterThan: EXPIRY_REQUIRED },
  'a multipart expiry',
);

/** The blobs a purge freed, for the data plane to collect now (none named: all that are unreferenced). */
export const readBlobCollectionBody = bodyReader(
  z.object({ blobIds: z.array(z.number().refine(Number.isSafeInteger)).optional() }),
  { blobIds: () => new S3Error('InvalidArgument', 'blobIds must be a list of integers') },
  'a blob collection',
);
