import {
  granteeOf,
  MAX_GRANTS,
  OBJECT_OWNERSHIPS,
  PERMISSIONS,
  S3Error,
  type AccessControlList,
  type ObjectOwnership,
  type Permission,
  type PublicAccessBlock,
  type RequestedGrant,
} from '../../../object-model/src/index.js';
import { owner } from './render.js';
import { xmlGroup, xmlText } from './xml.js';

/** S3's AccessControlPolicy, OwnershipControls and PublicAccessBlockConfiguration documents. */

const XSI = 'http://www.w3.org/2001/XMLSchema-instance';

function malformedAcl(why: string): S3Error {
  return new S3Error('MalformedACLError', `The XML you provided was not well-formed or did not validate against our published schema: ${why}`);
}

/** An ACL as S3 writes it (Owner, then each grant with its grantee's xsi:type). */
export function renderAccessControlPolicy(acl: AccessControlList): Record<string, unknown> {
  return {
    Owner: owner(acl.owner),
    AccessControlList: {
      Grant: acl.grants.map((g) => ({
        Grantee:
          'id' in g.grantee
            ? { '@_xmlns:xsi': XSI, '@_xsi:type': 'CanonicalUser', ...owner(g.grantee.id) }
            : { '@_xmlns:xsi': XSI, '@_xsi:type': 'Group', URI: g.grantee.group },
        Permission: g.permission,
      })),
    },
  };
}

/**
 * The grants of an AccessControlPolicy body (its Owner is the resource's and is not changed by it). A
 * grantee is an ID (a Strata user), a URI (AllUsers, AuthenticatedUsers) or an EmailAddress (a user's,
 * resolved before the ACL is kept); xsi:type follows from which.
 */
export function parseAccessControlPolicy(doc: Record<string, unknown>): RequestedGrant[] {
  const list = xmlGroup(doc.AccessControlList, 'AccessControlList');
  if (list === undefined) throw malformedAcl('AccessControlList is required.');
  const grants = (list.Grant ?? []) as unknown[];
  if (grants.length > MAX_GRANTS) throw malformedAcl(`an ACL holds at most ${MAX_GRANTS} grants.`);
  return grants.map((raw) => {
    const grant = xmlGroup(raw, 'Grant') ?? {};
    const grantee = xmlGroup(grant.Grantee, 'Grantee');
    const permission = xmlText(grant.Permission, 'Permission');
    if (!grantee || permission === undefined) throw malformedAcl('each Grant needs a Grantee and a Permission.');
    if (!PERMISSIONS.includes(permission as Permission)) throw malformedAcl(`${permission} is not a permission.`);
    const id = xmlText(grantee.ID, 'ID');
    const uri = xmlText(grantee.URI, 'URI');
    const email = xmlText(grantee.EmailAddress, 'EmailAddress');
    const [type, value] = id !== undefined ? ['id', id] : uri !== undefined ? ['uri', uri] : email !== undefined ? ['emailAddress', email] : [];
    if (type === undefined) throw malformedAcl('a Grantee needs an ID, a URI or an EmailAddress.');
    return { grantee: granteeOf(type, value!.trim()), permission: permission as Permission };
  });
}

export function renderOwnershipControls(ownership: ObjectOwnership): Record<string, unknown> {
  return { Rule: [{ ObjectOwnership: ownership }] };
}

export function parseOwnershipControls(doc: Record<string, unknown>): ObjectOwnership {
  const rules = (doc.Rule ?? []) as unknown[];
  if (rules.length !== 1) throw new S3Error('MalformedXML', 'OwnershipControls must hold exactly one Rule.');
  const value = xmlText(xmlGroup(rules[0], 'Rule')?.ObjectOwnership, 'ObjectOwnership');
  if (!OBJECT_OWNERSHIPS.includes(value as ObjectOwnership))
    throw new S3Error('MalformedXML', `ObjectOwnership must be one of ${OBJECT_OWNERSHIPS.join(', ')}.`);
  return value as ObjectOwnership;
}

const BLOCK_FIELDS = [
  ['BlockPublicAcls', 'blockPublicAcls'],
  ['IgnorePublicAcls', 'ignorePublicAcls'],
  ['BlockPublicPolicy', 'blockPublicPolicy'],
  ['RestrictPublicBuckets', 'restrictPublicBuckets'],
] as const;

export function renderPublicAccessBlock(block: PublicAccessBlock): Record<string, unknown> {
  return Object.fromEntries(BLOCK_FIELDS.map(([element, field]) => [element, String(block[field])]));
}

/** A field left out is false, as S3 takes it. */
export function parsePublicAccessBlock(doc: Record<string, unknown>): PublicAccessBlock {
  const block = {} as PublicAccessBlock;
  for (const [element, field] of BLOCK_FIELDS) {
    const v = xmlText(doc[element], element)?.trim().toLowerCase();
    if (v !== undefined && v !== 'true' && v !== 'false') throw new S3Error('MalformedXML', `${element} must be true or false.`);
    block[field] = v === 'true';
  }
  return block;
}
