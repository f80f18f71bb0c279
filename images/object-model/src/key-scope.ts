import { S3Error } from './s3-errors.js';
import { isValidBucketName } from './s3-names.js';

/**
 * A scoped access key (MinIO's service account with a policy, the Strata way): a key of its parent user
 * that may only read, and only the named buckets, each optionally under a key prefix. It acts as its
 * parent (bucket ownership and ACLs are asked of the parent) and the gateway refuses whatever falls
 * outside the scope (auth/key-scope.ts). The control plane stores it; the gateway enforces it.
 */
export interface ScopedResource {
  bucket: string;
  /** Keys that start with it ('' for the whole bucket). */
  prefix: string;
}

export interface KeyScope {
  /** Only reads: GET, HEAD, listings and the reads of ACLs, tags and configurations. */
  access: 'read';
  resources: ScopedResource[];
}

/** Most resources one key may name. */
export const MAX_SCOPED_RESOURCES = 16;
const MAX_PREFIX_BYTES = 1024;

function invalid(message: string): S3Error {
  return new S3Error('InvalidArgument', message);
}

/**
 * The scope a request asks for: `{"buckets": [...], "prefix"?: "..."}` (one prefix for every bucket) or
 * `{"resources": [{"bucket", "prefix"?}, ...]}`; `access` may only be "read". Throws InvalidArgument.
 */
export function parseKeyScope(body: unknown): KeyScope {
  const b = (body ?? {}) as { access?: unknown; buckets?: unknown; prefix?: unknown; resources?: unknown };
  if (b.access !== undefined && b.access !== 'read') throw invalid('access: only "read" keys exist.');
  let raw: Array<{ bucket?: unknown; prefix?: unknown }>;
  if (b.resources !== undefined) {
    if (b.buckets !== undefined || b.prefix !== undefined) throw invalid('Give either "resources" or "buckets" (and "prefix"), not both.');
    if (!Array.isArray(b.resources)) throw invalid('resources: a list of {"bucket": string, "prefix"?: string}.');
    raw = b.resources as typeof raw;
  } else {
    if (!Array.isArray(b.buckets)) throw invalid('A scoped key names its buckets: {"buckets": [string], "prefix"?: string}.');
    raw = (b.buckets as unknown[]).map((bucket) => ({ bucket, prefix: b.prefix }));
  }
  if (raw.length === 0 || raw.length > MAX_SCOPED_RESOURCES) throw invalid(`A scoped key names 1 to ${MAX_SCOPED_RESOURCES} buckets.`);
  const resources = raw.map((r) => {
    const { bucket, prefix = '' } = (r ?? {}) as { bucket?: unknown; prefix?: unknown };
    if (typeof bucket !== 'string' || !isValidBucketName(bucket)) throw invalid(`Not a bucket name: ${JSON.stringify(bucket)}.`);
    if (typeof prefix !== 'string' || Buffer.byteLength(prefix) > MAX_PREFIX_BYTES) throw invalid(`prefix: a string of at most ${MAX_PREFIX_BYTES} bytes.`);
    return { bucket, prefix };
  });
  return { access: 'read', resources };
}

/** Whether a stored value is a KeyScope (read back from the database or the wire). */
export function isKeyScope(value: unknown): value is KeyScope {
  const s = value as KeyScope | undefined;
  return (
    !!s &&
    s.access === 'read' &&
    Array.isArray(s.resources) &&
    s.resources.length > 0 &&
    s.resources.every((r) => typeof r?.bucket === 'string' && typeof r.prefix === 'string')
  );
}

/** The credentials of a scoped key as the control plane answers them when it is made. */
export interface ScopedKeyCredentials {
  accessKey: string;
  secretKey: string;
  /** The user it acts as. */
  parent: string;
  scope: KeyScope;
}
