import type http from 'node:http';
import {
  aclHeaders,
  allows,
  cannedGrants,
  isPublic,
  OWNER_ONLY_ACLS,
  requestedAcl,
  S3Error,
  storedAcl,
  type AccessControlList,
  type BucketInfo,
  type ObjectOwnership,
  type Grant,
  type Permission,
  type RequestedAcl,
  type ResolvedAcl,
  type StoredHeaders,
} from '../../../object-model/src/index.js';

/**
 * Who may do what with a bucket and its objects: S3's rules for ownership controls, ACLs and the public
 * access block. `platformBlocksPublic` is the server's switch (STRATA_BLOCK_PUBLIC_ACLS): on, it works as
 * a public access block with BlockPublicAcls and IgnorePublicAcls on every bucket.
 */

/** A bucket without ownership controls (its owner deleted them) honours ACLs as ObjectWriter, as S3. */
export function ownershipOf(bucket: BucketInfo): ObjectOwnership {
  return bucket.ownership?.[0]?.objectOwnership ?? 'ObjectWriter';
}

export function aclsEnabled(bucket: BucketInfo): boolean {
  return ownershipOf(bucket) !== 'BucketOwnerEnforced';
}

/** New public ACLs are refused (403 AccessDenied, as S3's BlockPublicAcls). */
export function blocksPublicAcls(bucket: BucketInfo, platformBlocksPublic: boolean): boolean {
  return platformBlocksPublic || bucket.publicAccessBlock?.[0]?.blockPublicAcls === true;
}

/** Existing public grants count for nothing (S3's IgnorePublicAcls). */
export function ignoresPublicAcls(bucket: BucketInfo, platformBlocksPublic: boolean): boolean {
  return platformBlocksPublic || bucket.publicAccessBlock?.[0]?.ignorePublicAcls === true;
}

/** The bucket's ACL: as its owner set it (no grant at all, after an empty one), else its owner's FULL_CONTROL. */
export function bucketAcl(bucket: BucketInfo): AccessControlList {
  return { owner: bucket.owner, grants: bucket.acl ?? cannedGrants('private', bucket.owner, bucket.owner) };
}

/**
 * An object's ACL. Without one kept with it (written private, or into a bucket with ACLs off) it belongs
 * to the bucket owner alone; with ACLs off (BucketOwnerEnforced) that holds whatever was kept, as S3.
 */
export function objectAcl(bucket: BucketInfo, headers: StoredHeaders | undefined): AccessControlList {
  const kept = aclsEnabled(bucket) ? storedAcl(headers) : undefined;
  return kept ?? { owner: bucket.owner, grants: cannedGrants('private', bucket.owner, bucket.owner) };
}

/**
 * Whether `caller` (undefined: anonymous) holds `permission` on the bucket. Its owner always does; others
 * only by a grant, and only where the bucket honours ACLs.
 */
export function bucketAllows(bucket: BucketInfo, caller: string | undefined, permission: Permission, platformBlocksPublic: boolean): boolean {
  if (caller !== undefined && caller === bucket.owner) return true;
  return aclsEnabled(bucket) && allows(bucketAcl(bucket), caller, permission, ignoresPublicAcls(bucket, platformBlocksPublic));
}

/**
 * The same for an object. The bucket's owner keeps every permission on every object in it (a tenant's
 * data never escapes its account's control; S3 itself would ask an ObjectWriter object's owner for a grant).
 */
export function objectAllows(
  bucket: BucketInfo,
  headers: StoredHeaders | undefined,
  caller: string | undefined,
  permission: Permission,
  platformBlocksPublic: boolean,
): boolean {
  if (caller !== undefined && caller === bucket.owner) return true;
  return aclsEnabled(bucket) && allows(objectAcl(bucket, headers), caller, permission, ignoresPublicAcls(bucket, platformBlocksPublic));
}

/**
 * The account an object write is from: the caller's, or for an anonymous write (a bucket granting AllUsers
 * WRITE) the bucket owner's. S3 would make the anonymous principal the object's owner, beyond its bucket
 * owner's reach unless granted; here the bucket owner owns it — its ACL's owner and the object's, so the bytes
 * count as the bucket owner's (usage, instant-upload scope) — and no account can ever act as "anonymous".
 */
export function writerOf(bucket: BucketInfo, caller: string | undefined): string {
  return caller ?? bucket.owner;
}

export interface AclTarget {
  bucket: BucketInfo;
  /** The user the write comes from (a new object's owner under ObjectWriter). */
  writer: string;
  /** The object's owner when its ACL is replaced (PutObjectAcl); a bucket ACL's owner is the bucket's. */
  owner?: string;
  kind: 'bucket' | 'object';
  platformBlocksPublic: boolean;
}

/**
 * The ACL a write asks for, as it is to be kept; undefined when nothing needs keeping (the bucket owner's
 * private default, or ACLs off). Refused as S3 refuses it: AccessControlListNotSupported where the bucket
 * has ACLs off (but `private` and `bucket-owner-full-control`, which ask for nothing else), AccessDenied
 * for a public ACL under a public access block.
 */
export function aclToKeep(requested: ResolvedAcl | undefined, target: AclTarget): AccessControlList | undefined {
  const { bucket, writer, kind } = target;
  const ownership = ownershipOf(bucket);
  if (ownership === 'BucketOwnerEnforced') {
    const ownerOnly =
      requested === undefined ||
      ('canned' in requested ? OWNER_ONLY_ACLS.has(requested.canned) : requested.grants.every((g) => 'id' in g.grantee && g.grantee.id === bucket.owner));
    if (ownerOnly) return undefined;
    throw new S3Error('AccessControlListNotSupported');
  }
  // The owner: a bucket's is its creator; an object's the writer, but the bucket owner where it prefers
  // to own objects written with bucket-owner-full-control (S3's BucketOwnerPreferred).
  let owner = target.owner ?? (kind === 'bucket' ? bucket.owner : writer);
  if (
    target.owner === undefined &&
    ownership === 'BucketOwnerPreferred' &&
    requested &&
    'canned' in requested &&
    requested.canned === 'bucket-owner-full-control'
  )
    owner = bucket.owner;
  const grants =
    requested === undefined
      ? cannedGrants('private', owner, bucket.owner)
      : 'canned' in requested
        ? cannedGrants(requested.canned, owner, bucket.owner)
        : requested.grants;
  if (isPublic(grants) && blocksPublicAcls(bucket, target.platformBlocksPublic))
    throw new S3Error('AccessDenied', 'Public ACLs are blocked (public access block).');
  // The bucket owner's private object needs nothing kept: that is what an object without an ACL is.
  if (
    owner === bucket.owner &&
    grants.length === 1 &&
    'id' in grants[0]!.grantee &&
    grants[0]!.grantee.id === owner &&
    grants[0]!.permission === 'FULL_CONTROL'
  )
    return undefined;
  return { owner, grants };
}

/** The user an e-mail address names (GatewayDeps.userByEmail). */
export type EmailResolver = (email: string) => Promise<{ username: string }>;

/**
 * The ACL with each grantee named by e-mail address replaced by the user with that address, as S3 keeps it
 * (a CanonicalUser, shown so by Get*Acl): one lookup per distinct address (whatever its case) per request;
 * UnresolvableGrantByEmailAddress for one no user has, before anything is written.
 */
export async function resolveAcl(requested: RequestedAcl | undefined, userByEmail: EmailResolver): Promise<ResolvedAcl | undefined> {
  if (!requested || 'canned' in requested) return requested;
  const users = new Map<string, Promise<string>>();
  const userOf = (email: string): Promise<string> => {
    const known = users.get(email.toLowerCase());
    if (known) return known;
    const user = userByEmail(email).then((u) => u.username);
    users.set(email.toLowerCase(), user);
    return user;
  };
  const grants = await Promise.all(
    requested.grants.map(
      async (g): Promise<Grant> =>
        'email' in g.grantee ? { grantee: { id: await userOf(g.grantee.email) }, permission: g.permission } : { grantee: g.grantee, permission: g.permission },
    ),
  );
  return { grants };
}

/** What an object write's ACL is checked and resolved with: the platform's public access block and the users' e-mail addresses. */
export interface AclContext {
  platformBlocksPublic: boolean;
  userByEmail: EmailResolver;
}

export const aclContext = (deps: { buckets: { platformBlocksPublic: boolean }; userByEmail: EmailResolver }): AclContext => ({
  platformBlocksPublic: deps.buckets.platformBlocksPublic,
  userByEmail: deps.userByEmail,
});

/**
 * The stored header of the ACL an object write asks for (x-amz-acl, x-amz-grant-*; a form's fields, `acl`
 * among them), as it is to be kept; undefined when there is none to keep.
 */
export async function objectAclHeaders(
  from: http.IncomingMessage | ((name: string) => string | undefined),
  bucket: BucketInfo,
  writer: string,
  context: AclContext,
  formAcl?: string,
): Promise<StoredHeaders | undefined> {
  const lookup = typeof from === 'function' ? from : (name: string) => headerValue(from, name);
  const requested = typeof from === 'function' ? requestedAcl(lookup, formAcl) : requestedAcl(lookup);
  const acl = aclToKeep(await resolveAcl(requested, context.userByEmail), {
    bucket,
    writer,
    kind: 'object',
    platformBlocksPublic: context.platformBlocksPublic,
  });
  return acl && aclHeaders(acl);
}

function headerValue(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}
