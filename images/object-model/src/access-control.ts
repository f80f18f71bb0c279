import { S3Error } from './s3-errors.js';
import type { StoredHeaders } from './stored-headers.js';

/**
 * Access control as S3 has it today: object ownership controls per bucket, ACLs (canned or grants) on
 * buckets and objects, and the public access block. Grantees are Strata users (by name, S3's canonical
 * ID here) or S3's AllUsers / AuthenticatedUsers groups; bucket policies stay out (DESIGN.md).
 */
export type Permission = 'READ' | 'WRITE' | 'READ_ACP' | 'WRITE_ACP' | 'FULL_CONTROL';
export const PERMISSIONS: readonly Permission[] = ['READ', 'WRITE', 'READ_ACP', 'WRITE_ACP', 'FULL_CONTROL'];

export const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers';
export const AUTHENTICATED_USERS = 'http://acs.amazonaws.com/groups/global/AuthenticatedUsers';
const GROUPS = new Set([ALL_USERS, AUTHENTICATED_USERS]);

export type Grantee = { id: string } | { group: string };
export interface Grant {
  grantee: Grantee;
  permission: Permission;
}
/**
 * A grant as a request may name it: also by e-mail address (S3's `emailAddress="..."`, AmazonCustomerByEmail),
 * which the gateway resolves to the user with that address before the ACL is kept (resolveAcl).
 */
export interface RequestedGrant {
  grantee: Grantee | { email: string };
  permission: Permission;
}

/** A resource's ACL: its owner (who always holds every permission) and its grants (the owner's own included, as S3 lists it). */
export interface AccessControlList {
  owner: string;
  grants: Grant[];
}

/** S3's object ownership: BucketOwnerEnforced turns ACLs off (S3's default for new buckets); the others honour them. */
export type ObjectOwnership = 'BucketOwnerEnforced' | 'BucketOwnerPreferred' | 'ObjectWriter';
export const OBJECT_OWNERSHIPS: readonly ObjectOwnership[] = ['BucketOwnerEnforced', 'BucketOwnerPreferred', 'ObjectWriter'];

/** A bucket's ownership controls as kept with it (one rule, as S3's OwnershipControls holds). */
export interface OwnershipRule {
  objectOwnership: ObjectOwnership;
}

/** A bucket's public access block. Policies do not exist here, so only the two ACL switches change anything. */
export interface PublicAccessBlock {
  blockPublicAcls: boolean;
  ignorePublicAcls: boolean;
  blockPublicPolicy: boolean;
  restrictPublicBuckets: boolean;
}

/** Canned ACLs S3 knows; `aws-exec-read` and `log-delivery-write` name AWS services Strata does not have. */
export const CANNED_ACLS = [
  'private',
  'public-read',
  'public-read-write',
  'authenticated-read',
  'bucket-owner-read',
  'bucket-owner-full-control',
  'aws-exec-read',
  'log-delivery-write',
] as const;
export type CannedAcl = (typeof CANNED_ACLS)[number];
/** Canned ACLs that grant no one but the owners anything: what a bucket with ACLs turned off still accepts (S3 does the same). */
export const OWNER_ONLY_ACLS: ReadonlySet<string> = new Set(['private', 'bucket-owner-full-control']);

/** What a request asks for: a canned ACL or explicit grants (never both, as S3). */
export type RequestedAcl = { canned: CannedAcl } | { grants: RequestedGrant[] };
/** The same once every e-mail grantee is resolved to its user (what is kept). */
export type ResolvedAcl = { canned: CannedAcl } | { grants: Grant[] };

/** The grant headers by the permission each gives. */
export const GRANT_HEADERS: Record<string, Permission> = {
  'x-amz-grant-read': 'READ',
  'x-amz-grant-write': 'WRITE',
  'x-amz-grant-read-acp': 'READ_ACP',
  'x-amz-grant-write-acp': 'WRITE_ACP',
  'x-amz-grant-full-control': 'FULL_CONTROL',
};

/** Names of Strata users (the control plane creates no other) — what an `id=` grantee must look like. */
export const USER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@+-]{2,63}$/;
/**
 * E-mail addresses users may have (and grants may name): one @, no spaces or quotes, a dotted domain of
 * letters, digits and hyphens; 254 characters at most (RFC 5321's path limit).
 */
export const USER_EMAIL = /^(?=.{3,254}$)[^\s@"<>(),;:\\]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/;
/** S3's answer for a grant to an address no account has (also one that is no address at all). */
export function unresolvableEmail(email: string): S3Error {
  return new S3Error('UnresolvableGrantByEmailAddress', undefined, { EmailAddress: email });
}
/** S3 allows 100 grants per ACL. */
export const MAX_GRANTS = 100;

/** A grantee as S3 names it in a grant header (`id="..."`, `uri="..."`, `emailAddress="..."`). */
export function granteeOf(type: string, value: string): RequestedGrant['grantee'] {
  switch (type.toLowerCase()) {
    case 'id':
      if (!USER_NAME.test(value))
        throw new S3Error('InvalidArgument', `Invalid id: ${value} is not a Strata user name.`, { ArgumentName: 'id', ArgumentValue: value });
      return { id: value };
    case 'uri':
      if (!GROUPS.has(value)) throw new S3Error('InvalidArgument', `Invalid group uri: ${value}.`, { ArgumentName: 'uri', ArgumentValue: value });
      return { group: value };
    case 'emailaddress':
      if (!USER_EMAIL.test(value)) throw unresolvableEmail(value);
      return { email: value };
    default:
      throw new S3Error('InvalidArgument', `Unknown grantee type ${type}.`, { ArgumentName: type });
  }
}

/** One grant header's value: `id="a", uri="http://..."` (quotes optional). */
function parseGrantHeader(name: string, value: string): RequestedGrant[] {
  const permission = GRANT_HEADERS[name]!;
  const grants: RequestedGrant[] = [];
  for (const part of value.split(',')) {
    const m = /^\s*([A-Za-z]+)\s*=\s*"?([^"]*)"?\s*$/.exec(part);
    if (!m)
      throw new S3Error('InvalidArgument', `${name} must list grantees as id="...", uri="..." or emailAddress="...".`, {
        ArgumentName: name,
        ArgumentValue: value,
      });
    grants.push({ grantee: granteeOf(m[1]!, m[2]!), permission });
  }
  return grants;
}

/**
 * The ACL a request's headers (or a form's fields: `acl` instead of `x-amz-acl`) ask for; undefined when
 * none. As S3: an unknown canned ACL is InvalidArgument, a canned ACL with grant headers InvalidRequest.
 */
export function requestedAcl(lookup: (name: string) => string | undefined, canned = lookup('x-amz-acl')): RequestedAcl | undefined {
  if (canned !== undefined && !(CANNED_ACLS as readonly string[]).includes(canned))
    throw new S3Error('InvalidArgument', `${canned} is not a canned ACL.`, { ArgumentName: 'x-amz-acl', ArgumentValue: canned });
  const headers = Object.keys(GRANT_HEADERS).filter((name) => lookup(name) !== undefined);
  if (canned !== undefined && headers.length) throw new S3Error('InvalidRequest', 'Specifying both Canned ACLs and Header Grants is not allowed');
  if (canned === 'aws-exec-read' || canned === 'log-delivery-write')
    throw new S3Error('NotImplemented', `Strata has no AWS service for the canned ACL ${canned}.`);
  if (canned !== undefined) return { canned: canned as CannedAcl };
  if (!headers.length) return undefined;
  const grants = headers.flatMap((name) => parseGrantHeader(name, lookup(name)!));
  if (grants.length > MAX_GRANTS) throw new S3Error('InvalidArgument', `An ACL holds at most ${MAX_GRANTS} grants.`);
  return { grants };
}

/** The grants of a canned ACL on a resource owned by `owner` in a bucket owned by `bucketOwner`. */
export function cannedGrants(canned: CannedAcl, owner: string, bucketOwner: string): Grant[] {
  const grants: Grant[] = [{ grantee: { id: owner }, permission: 'FULL_CONTROL' }];
  const toBucketOwner = (permission: Permission) => (bucketOwner !== owner ? [{ grantee: { id: bucketOwner }, permission }] : []);
  switch (canned) {
    case 'public-read':
      return [...grants, { grantee: { group: ALL_USERS }, permission: 'READ' }];
    case 'public-read-write':
      return [...grants, { grantee: { group: ALL_USERS }, permission: 'READ' }, { grantee: { group: ALL_USERS }, permission: 'WRITE' }];
    case 'authenticated-read':
      return [...grants, { grantee: { group: AUTHENTICATED_USERS }, permission: 'READ' }];
    case 'bucket-owner-read':
      return [...grants, ...toBucketOwner('READ')];
    case 'bucket-owner-full-control':
      return [...grants, ...toBucketOwner('FULL_CONTROL')];
    default:
      return grants;
  }
}

/** Whether any grant is to everyone or to every signed-in user (what a public access block is about). */
export function isPublic(grants: readonly Grant[]): boolean {
  return grants.some((g) => 'group' in g.grantee);
}

/**
 * Whether `caller` (a user name; undefined: anonymous) holds `permission` on a resource with this ACL.
 * The owner holds every permission; FULL_CONTROL holds every other; with `ignorePublic` the group
 * grants count for nothing (public access block IgnorePublicAcls).
 */
export function allows(acl: AccessControlList, caller: string | undefined, permission: Permission, ignorePublic = false): boolean {
  if (caller !== undefined && caller === acl.owner) return true;
  return acl.grants.some((g) => {
    if (g.permission !== permission && g.permission !== 'FULL_CONTROL') return false;
    if ('id' in g.grantee) return caller !== undefined && g.grantee.id === caller;
    if (ignorePublic) return false;
    return g.grantee.group === ALL_USERS || (g.grantee.group === AUTHENTICATED_USERS && caller !== undefined);
  });
}

/**
 * An object's ACL is kept among its stored headers under this name (one JSON value), so that it travels
 * with the object through every write path (PUT, copy, multipart create → complete, form upload) without
 * a schema change. It is never answered as a header (withoutAcl).
 */
export const OBJECT_ACL_HEADER = 'x-strata-acl';

/** The stored header holding `acl`. */
export function aclHeaders(acl: AccessControlList): StoredHeaders {
  return {
    [OBJECT_ACL_HEADER]: JSON.stringify({
      o: acl.owner,
      g: acl.grants.map((g) => ['id' in g.grantee ? `id:${g.grantee.id}` : `uri:${g.grantee.group}`, g.permission]),
    }),
  };
}

/** The ACL kept among an object's headers; undefined when it has none (then it is the bucket owner's, private). */
export function storedAcl(headers: StoredHeaders | undefined): AccessControlList | undefined {
  const raw = headers?.[OBJECT_ACL_HEADER];
  if (raw === undefined) return undefined;
  const parsed = JSON.parse(raw) as { o: string; g: Array<[string, Permission]> };
  return {
    owner: parsed.o,
    grants: parsed.g.map(([who, permission]) => ({ grantee: who.startsWith('id:') ? { id: who.slice(3) } : { group: who.slice(4) }, permission })),
  };
}

/** Whether a stored ACL header's value is one aclHeaders wrote (what the data plane accepts from the gateway). */
export function isStoredAcl(value: string): boolean {
  try {
    const acl = storedAcl({ [OBJECT_ACL_HEADER]: value })!;
    return (
      USER_NAME.test(acl.owner) &&
      acl.grants.length <= MAX_GRANTS + 2 &&
      acl.grants.every((g) => PERMISSIONS.includes(g.permission) && ('id' in g.grantee ? USER_NAME.test(g.grantee.id) : GROUPS.has(g.grantee.group)))
    );
  } catch {
    return false;
  }
}

/** The headers without the ACL (what readers are answered). */
export function withoutAcl(headers: StoredHeaders | undefined): StoredHeaders | undefined {
  if (!headers || headers[OBJECT_ACL_HEADER] === undefined) return headers;
  const { [OBJECT_ACL_HEADER]: _acl, ...kept } = headers;
  return Object.keys(kept).length ? kept : undefined;
}
