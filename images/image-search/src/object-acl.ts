// Who the object store lets GET an object, from its ACL (GetObjectAcl, `?acl`): the object's owner,
// users granted READ or FULL_CONTROL, AuthenticatedUsers (any logged-in user) and AllUsers (anyone).
// The bucket source reads each object's ACL with its own credentials (the bucket's owner may read every
// ACL in its bucket) when it may have changed (acl-refresh.ts) and keeps it with the mirror's record, so
// image search answers "may this caller see this image" as the gateway would, without a request per
// search (hack/docs/object-storage.md "Access control").
import { XMLParser } from 'fast-xml-parser';

/** The readers an object's ACL names. */
export interface ObjectReaders {
  /** Users who may GET it: the object's owner and READ / FULL_CONTROL grantees. */
  users: string[];
  /** AuthenticatedUsers READ: any caller with a valid gateway login. */
  authenticated: boolean;
  /** AllUsers READ: anyone, anonymous included. */
  everyone: boolean;
}

/** A mirrored image's object: its bucket and key, and who may read it (unknown until its ACL was read). */
export interface MirroredObject {
  bucket: string;
  key: string;
  readers?: ObjectReaders;
}

export const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers';
export const AUTHENTICATED_USERS = 'http://acs.amazonaws.com/groups/global/AuthenticatedUsers';
const READS = new Set(['READ', 'FULL_CONTROL']);

const parser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, isArray: (name) => name === 'Grant' });

/** The readers of an AccessControlPolicy document; throws when it is not one. */
export function readersOfAcl(xml: string): ObjectReaders {
  const doc = parser.parse(xml) as {
    AccessControlPolicy?: {
      Owner?: { ID?: string };
      AccessControlList?: { Grant?: Array<{ Grantee?: { ID?: string; URI?: string }; Permission?: string }> } | '';
    };
  };
  const policy = doc.AccessControlPolicy;
  if (!policy) throw new Error('the object store answered GetObjectAcl with something that is not an AccessControlPolicy');
  const users = new Set<string>();
  if (policy.Owner?.ID) users.add(String(policy.Owner.ID));
  const readers: ObjectReaders = { users: [], authenticated: false, everyone: false };
  const list = policy.AccessControlList || {};
  for (const grant of list.Grant ?? []) {
    if (!READS.has(String(grant.Permission ?? ''))) continue;
    const grantee = grant.Grantee ?? {};
    if (grantee.ID) users.add(String(grantee.ID));
    else if (grantee.URI === ALL_USERS) readers.everyone = true;
    else if (grantee.URI === AUTHENTICATED_USERS) readers.authenticated = true;
  }
  readers.users = [...users].sort();
  return readers;
}

/** Whether a stored value is ObjectReaders (the record is read back from disk). */
export function isObjectReaders(value: unknown): value is ObjectReaders {
  const r = value as ObjectReaders | undefined;
  return (
    !!r && Array.isArray(r.users) && r.users.every((u) => typeof u === 'string') && typeof r.authenticated === 'boolean' && typeof r.everyone === 'boolean'
  );
}

/** An S3 answer: status and body. */
export interface XmlAnswer {
  status: number;
  body: string;
}

/**
 * Whether the bucket's public access block makes public grants count for nothing (IgnorePublicAcls, as the
 * gateway decides); none (404 NoSuchPublicAccessBlockConfiguration) is false, anything unreadable true.
 */
export function publicAclsIgnored(answer: XmlAnswer): boolean {
  if (answer.status === 404) return false;
  const doc = parser.parse(answer.body) as { PublicAccessBlockConfiguration?: { IgnorePublicAcls?: string } };
  return answer.status !== 200 || !doc.PublicAccessBlockConfiguration || doc.PublicAccessBlockConfiguration.IgnorePublicAcls === 'true';
}

/** Public grants as they count where the bucket ignores them (IgnorePublicAcls): none. */
export function effectiveReaders(readers: ObjectReaders | undefined, ignorePublic: boolean): ObjectReaders | undefined {
  return readers && ignorePublic ? { ...readers, everyone: false, authenticated: false } : readers;
}

/**
 * Whether an ACL lets anyone but the bucket's owner read (`owner` unknown: any user it names): only then can
 * a change to it take access away, since the bucket's owner reads every object whatever its ACL says.
 */
export function grantsBeyondOwner(readers: ObjectReaders, owner: string | undefined): boolean {
  return readers.everyone || readers.authenticated || readers.users.some((u) => u !== owner);
}

/**
 * Read the ACLs (GetObjectAcl, 8 at a time, `fetchXml(key)`) of the entries at `wanted` paths and the
 * bucket's public access block (`fetchXml(null)`, every time: one request). The readers are kept as the
 * ACL names them; the block applies where they are used (effectiveReaders), so that its changes count at
 * once. An ACL that cannot be read keeps what was known (unknown: the bucket owner's rule alone) and its
 * key is in `failed`. Answers whether any readers changed and how many ACLs were asked for.
 */
export async function readReaders<E extends { key: string; readers?: ObjectReaders }>(
  entries: Map<string, E>,
  wanted: readonly string[],
  fetchXml: (key: string | null) => Promise<XmlAnswer>,
): Promise<{ changed: boolean; ignorePublic: boolean; requests: number; failed: Map<string, string> }> {
  let changed = false;
  const failed = new Map<string, string>();
  const ignorePublic = await fetchXml(null).then(publicAclsIgnored, () => true);
  await forEachLimited(wanted, 8, async (p) => {
    const entry = entries.get(p)!;
    try {
      const answer = await fetchXml(entry.key);
      if (answer.status !== 200) throw new Error(`GetObjectAcl answered ${answer.status}`);
      const readers = readersOfAcl(answer.body);
      if (JSON.stringify(readers) === JSON.stringify(entry.readers)) return;
      entries.set(p, { ...entries.get(p)!, readers });
      changed = true;
    } catch (err) {
      failed.set(entry.key, err instanceof Error ? err.message : String(err));
    }
  });
  return { changed, ignorePublic, requests: wanted.length, failed };
}

/** Run `fn` over `items`, at most `limit` at a time. */
async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
