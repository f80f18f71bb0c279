import { z } from 'zod';
import { CHECKSUM_ALGORITHMS } from './checksum-algorithms.js';
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

/** A CopyObject body, checked: the S3 error of its first wrong field (in the schema's order), InvalidArgument for any other. */
export function readCopyObjectBody(value: unknown): z.output<typeof COPY_OBJECT_BODY> {
  const result = COPY_OBJECT_BODY.safeParse(value ?? {});
  if (result.success) return result.data;
  const field = String(result.error.issues[0]?.path[0] ?? '');
  throw COPY_OBJECT_BODY_ERRORS[field]?.() ?? new S3Error('InvalidArgument', `${field} is not valid in a copy request`);
}
