import { z } from 'zod';
import { MAX_GRANTS, type AccessControlList } from './access-control.js';
import { BUCKET_CONFIG_OUTLINES, type BucketConfigs } from './bucket-configs.js';
import { MAX_CORS_RULES } from './bucket-cors.js';
import { MAX_LIFECYCLE_RULES } from './bucket-lifecycle.js';
import { S3Error } from './s3-errors.js';
import { readPageSize } from './object-rules.js';
import { MAX_BUCKET_TAGS, objectTagsFromJson } from './tags.js';
import { bodyReader } from './wire.js';

/**
 * The control plane's internal API input (bodies, queries, path ids), declared once: each route reads
 * its input through one reader here, which answers the checked value or throws the 400-class S3 error
 * that names what is wrong. Semantics (user names, key rules, ownership) stay with the code that owns them.
 */

/** Query text that may be absent (Express gives a repeated name as a list: that is refused). */
const queryText = z.string().optional();
const invalid =
  (message: string, extra: Record<string, string> = {}) =>
  () =>
    new S3Error('InvalidArgument', message, extra);

/** POST /users and /users/verify: `{username, password, email?}`, strings (their rules: the user service's). */
export const readUserBody = bodyReader(
  z.object({ username: z.string(), password: z.string(), email: z.string().optional() }),
  { username: invalid('username must be a string'), password: invalid('password must be a string'), email: invalid('email must be a string') },
  'a user request',
);

/** PATCH /users/:username: `{email}`, an address or null (the user then has none). */
export const readUserChangeBody = bodyReader(
  z.object({ email: z.string().nullable() }),
  { email: invalid('email must be an e-mail address or null') },
  'a user change',
);

export const BACKEND_KINDS = ['fs', 'minio', 'cloud'] as const;

/** The most rules of each bucket configuration. */
export const BUCKET_CONFIG_MAX: { [K in keyof BucketConfigs]: number } = {
  lifecycle: MAX_LIFECYCLE_RULES,
  cors: MAX_CORS_RULES,
  tags: MAX_BUCKET_TAGS,
  ownership: 1,
  // Grants besides the owner's own and one more of S3's defaults.
  acl: MAX_GRANTS + 2,
  publicAccessBlock: 1,
  encryption: 1,
  logging: 1,
};

/** A configuration's rules (checked by their outline; the gateway validated them against S3's schema). */
const configRules = <K extends keyof BucketConfigs>(kind: K, min: number, max: number) =>
  z.array(z.custom<BucketConfigs[K][number]>(BUCKET_CONFIG_OUTLINES[kind])).min(min).max(max);

/**
 * PUT /buckets/:bucket: `{owner, backend?, ownership?, acl?}`; the backend defaults to fs, its settings beside
 * its kind. Ownership controls and an ACL other than the defaults are created with the bucket, in its transaction.
 */
export const readCreateBucketBody = bodyReader(
  z.object({
    owner: z.string().min(1),
    backend: z
      .looseObject({ kind: z.enum(BACKEND_KINDS) })
      .nullish()
      .transform((b) => b ?? { kind: 'fs' as const }),
    ownership: configRules('ownership', 1, 1).optional(),
    acl: configRules('acl', 0, BUCKET_CONFIG_MAX.acl).optional(),
  }),
  {
    owner: invalid('owner is required'),
    backend: invalid(`backend.kind must be one of ${BACKEND_KINDS.join(', ')}`),
    ownership: () => new S3Error('MalformedXML', 'ownership must be a list of one ownership rule'),
    acl: () => new S3Error('MalformedXML', `acl must be a list of 0 to ${BUCKET_CONFIG_MAX.acl} grants`),
  },
  'a bucket creation',
);

/**
 * PUT /buckets/:bucket/<kind>: `{rules}`, 1 to that configuration's most rules, each of its outline; MalformedXML otherwise.
 * An ACL may hold no grant (S3 accepts an empty AccessControlList: its owner keeps access as owner).
 */
export function readBucketConfigBody<K extends keyof BucketConfigs>(kind: K): (value: unknown) => { rules: BucketConfigs[K] } {
  const max = BUCKET_CONFIG_MAX[kind];
  const min = kind === 'acl' ? 0 : 1;
  // (A list of BucketConfigs[K][number] is a BucketConfigs[K]; TypeScript cannot see it for a generic K.)
  return bodyReader(
    z.object({ rules: configRules(kind, min, max) }),
    { rules: () => new S3Error('MalformedXML', `rules must be a list of ${min} to ${max} ${kind} rules`) },
    `${kind} rules`,
  ) as (value: unknown) => { rules: BucketConfigs[K] };
}

/** GET /buckets/:bucket/objects: a listing's query (camelCase or S3's names); max-keys as readPageSize reads it (capped at 1000). */
export const readListObjectsQuery = (query: unknown) => {
  const q = bodyReader(
    z.object({
      prefix: queryText,
      delimiter: queryText,
      maxKeys: queryText,
      'max-keys': queryText,
      startAfter: queryText,
      'start-after': queryText,
      marker: queryText,
      continuationToken: queryText,
      'continuation-token': queryText,
    }),
    {},
    'a listing',
  )(query);
  const rawMax = q.maxKeys ?? q['max-keys'];
  return {
    prefix: q.prefix ?? '',
    delimiter: q.delimiter ?? '',
    maxKeys: readPageSize(rawMax, 'max-keys'),
    startAfter: q.startAfter ?? q['start-after'],
    marker: q.marker,
    continuationToken: q.continuationToken ?? q['continuation-token'],
  };
};

/** What a conditional delete requires, as the control plane reads it (a Date to compare with). */
export interface DeleteConditionsInput {
  ifMatch?: string;
  lastModifiedTime?: Date;
  size?: number;
}

const DELETE_CONDITIONS = z.object({
  ifMatch: z.string().optional(),
  lastModifiedTime: z
    .union([z.string(), z.number()])
    .transform((t) => new Date(typeof t === 'number' ? t : String(t)))
    .refine((d) => !Number.isNaN(d.getTime()))
    .optional(),
  size: z
    .union([z.string().regex(/^\d+$/), z.number()])
    .transform(Number)
    .refine(Number.isSafeInteger)
    .refine((n) => n >= 0)
    .optional(),
});

const readDeleteConditionFields = bodyReader(
  DELETE_CONDITIONS,
  {
    ifMatch: invalid('ifMatch must be a string'),
    lastModifiedTime: invalid('lastModifiedTime must be a timestamp'),
    size: invalid('size must be a whole number of bytes'),
  },
  'a conditional delete',
);

/** A conditional delete's requirements from a query (DELETE) or a JSON entry (delete-objects); none: undefined. */
export function readDeleteConditions(fields: unknown): DeleteConditionsInput | undefined {
  const { ifMatch, lastModifiedTime, size } = readDeleteConditionFields(fields);
  const c: DeleteConditionsInput = {
    ...(ifMatch !== undefined ? { ifMatch } : {}),
    ...(lastModifiedTime !== undefined ? { lastModifiedTime } : {}),
    ...(size !== undefined ? { size } : {}),
  };
  return Object.keys(c).length ? c : undefined;
}

/** The most objects one DeleteObjects names (S3's limit). */
export const MAX_DELETE_OBJECTS = 1000;

/**
 * POST /buckets/:bucket/delete-objects: `objects` ([{key, ifMatch?, lastModifiedTime?, size?}]) or
 * plain `keys`; at most 1000. Each entry is read on its own (readDeleteEntry): one wrong entry is that
 * entry's error in the answer, not the request's.
 */
export const readDeleteObjectsBody = (value: unknown): unknown[] => {
  const body = (typeof value === 'object' && value !== null ? value : {}) as { objects?: unknown; keys?: unknown };
  const objects = body.objects ?? (Array.isArray(body.keys) ? body.keys.map((key: unknown) => ({ key })) : undefined);
  if (!Array.isArray(objects) || objects.length > MAX_DELETE_OBJECTS)
    throw new S3Error('MalformedXML', `objects must be a list of at most ${MAX_DELETE_OBJECTS} objects`);
  return objects;
};

/** One entry of a delete-objects body: its key (InvalidObjectName unless a string) and its conditions. */
export function readDeleteEntry(entry: unknown): { key: string; conditions?: DeleteConditionsInput } {
  const key = typeof entry === 'object' && entry !== null ? (entry as { key?: unknown }).key : undefined;
  if (typeof key !== 'string') throw new S3Error('InvalidObjectName', 'keys must be strings');
  const conditions = readDeleteConditions(entry);
  return conditions ? { key, conditions } : { key };
}

/** PUT .../objects/:key/tagging: `{tags}`, a list of {key, value} (empty: remove them). */
export const readObjectTagsBody = (value: unknown) => {
  const tags = objectTagsFromJson((value as { tags?: unknown } | undefined)?.tags);
  if (!tags) throw new S3Error('InvalidTag', 'tags must be a list of {key, value}');
  return { tags };
};

const ACL_ERROR = () => new S3Error('MalformedACLError', 'acl must be {owner, grants} of Strata users and groups (null removes it)');

/** PUT .../objects/:key/acl: `{acl}`, an ACL's outline or null (remove it); who may be named is checked where it is stored. */
export const readObjectAclBody = bodyReader(
  z.object({
    acl: z
      .object({
        owner: z.string(),
        grants: z.array(
          z.object({
            grantee: z.union([z.object({ id: z.string() }), z.object({ group: z.string() })]),
            permission: z.enum(['READ', 'WRITE', 'READ_ACP', 'WRITE_ACP', 'FULL_CONTROL']),
          }),
        ),
      })
      .nullable()
      .transform((acl): AccessControlList | undefined => acl ?? undefined),
  }),
  { acl: ACL_ERROR },
  'an object ACL',
);

/** A query's `limit`: a whole number from 1 to `max`. */
const queryLimit = (max: number) =>
  z
    .string()
    .regex(/^\d+$/)
    .transform(Number)
    .refine((n) => n >= 1 && n <= max);

/** The most buckets one ListBuckets page shows (S3's `max-buckets` limit). */
export const MAX_BUCKETS_PAGE = 10_000;

/**
 * GET /users/:username/buckets: `prefix`, `after` (a name), `limit` (1 to one more than a page: the caller
 * learns whether another page follows), `names` (comma-separated; bucket names hold no comma). All optional.
 */
export const readListBucketsQuery = bodyReader(
  z.object({
    prefix: queryText,
    after: queryText,
    limit: queryLimit(MAX_BUCKETS_PAGE + 1).optional(),
    names: queryText.transform((n) => (n === undefined ? undefined : n.split(','))),
  }),
  { limit: invalid(`limit must be a whole number from 1 to ${MAX_BUCKETS_PAGE + 1}`) },
  'a bucket listing',
);

/** The most objects one recycle-bin page answers. */
export const RECYCLE_BIN_PAGE = 1000;

/** GET /recycle-bin: `limit` (1-1000, default 1000), `owner`, `bucket`, `prefix`, `after` (a page's nextToken, still opaque). */
export const readRecycleBinQuery = bodyReader(
  z.object({
    owner: queryText,
    bucket: queryText,
    prefix: queryText,
    after: queryText,
    limit: queryLimit(RECYCLE_BIN_PAGE)
      .optional()
      .transform((n) => n ?? RECYCLE_BIN_PAGE),
  }),
  { limit: invalid(`limit must be a whole number from 1 to ${RECYCLE_BIN_PAGE}`) },
  'a recycle-bin listing',
);

/** POST /recycle-bin/:id/restore: the id (a positive integer) and the body's `owner` (restores only that owner's object when given). */
export function readRestoreInput(id: string, body: unknown): { id: number; owner?: string } {
  const n = /^\d+$/.test(id) ? Number(id) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw new S3Error('InvalidArgument', 'recycle-bin ids are positive integers');
  const { owner } = readRestoreBody(body);
  return owner === undefined ? { id: n } : { id: n, owner };
}

const readRestoreBody = bodyReader(z.object({ owner: z.string().optional() }), { owner: invalid('owner must be a string') }, 'a restore');

/** POST /purge: `{now?}`, an ISO 8601 time to purge as of (default: the control plane's clock). */
export const readPurgeBody = bodyReader(
  z.object({
    now: z
      .string()
      .optional()
      .refine((t) => t === undefined || t === '' || !Number.isNaN(Date.parse(t)))
      .transform((t) => (t ? new Date(t) : undefined)),
  }),
  { now: invalid('now must be an ISO 8601 time') },
  'a purge',
);
