// Who the object store lets GET an object, from its ACL (GetObjectAcl, `?acl`): the object's owner,
// users granted READ or FULL_CONTROL, AuthenticatedUsers (any logged-in user) and AllUsers (anyone).
// The bucket source reads each object's ACL with its own credentials (the bucket's owner may read every
// ACL in its bucket) at every round and keeps it with the mirror's record, so image search answers
// "may this caller see this image" as the gateway would, without a request per search; an ACL changed
// at the store is seen at the next round (hack/docs/object-storage.md "Access control").
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

/**
 * Set the readers of every entry not skipped from its ACL (GetObjectAcl, 8 at a time, `fetchXml(key)`)
 * and the bucket's public access block (`fetchXml(null)`): ACL changes do not change the ETag, so each
 * round asks again. An ACL that cannot be read keeps what was known (unknown: the bucket owner's rule
 * alone). Answers whether any readers changed, and the last failure.
 */
export async function readReaders<E extends { key: string; skipped?: string; readers?: ObjectReaders }>(
  entries: Map<string, E>,
  fetchXml: (key: string | null) => Promise<XmlAnswer>,
): Promise<{ changed: boolean; failed?: string }> {
  let changed = false;
  let failed: string | undefined;
  const ignorePublic = await fetchXml(null).then(publicAclsIgnored, () => true);
  const wanted = [...entries].filter(([, e]) => e.skipped === undefined);
  await forEachLimited(wanted, 8, async ([p, entry]) => {
    try {
      const answer = await fetchXml(entry.key);
      if (answer.status !== 200) throw new Error(`GetObjectAcl answered ${answer.status}`);
      const readers = readersOfAcl(answer.body);
      if (ignorePublic) Object.assign(readers, { everyone: false, authenticated: false });
      if (JSON.stringify(readers) === JSON.stringify(entry.readers)) return;
      entries.set(p, { ...entries.get(p)!, readers });
      changed = true;
    } catch (err) {
      failed = err instanceof Error ? err.message : String(err);
    }
  });
  return { changed, failed };
}

/** Run `fn` over `items`, at most `limit` at a time. */
async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
