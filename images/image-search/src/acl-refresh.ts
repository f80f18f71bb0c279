// Which mirrored objects' ACLs a sync round reads (GetObjectAcl), so that a round over an unchanged
// bucket costs no request per object and image search still never shows an image longer than one round
// after the store stopped letting a caller read it. An ACL is read in a round when:
//   - it is not known (a new object, or one whose content changed: its readers are dropped with it);
//   - the listing's LastModified changed (an overwrite with the same bytes, and so the same ETag, may set
//     another ACL), or an object event or a failed read named the key since the last round;
//   - it lets anyone but the bucket's owner read (grantsBeyondOwner): only such an ACL can take access
//     away when it changes, so these are read every round, as before;
//   - a full pass is due (every `refreshSeconds`, and at the first round of the process): it catches an
//     ACL-only change that grants more (PutObjectAcl keeps ETag and LastModified and sends no event).
// Until then such a grant is not shown: late, never too wide. Bucket-level state (owner, public access
// block) is read every round by the source itself, one request each.
import { grantsBeyondOwner, type ObjectReaders } from './object-acl.js';

export class AclRefresh {
  private lastFullPass: number | null = null;
  /** Keys named since the last read: by object events, by a LastModified change, or by a failed read. */
  private named = new Set<string>();

  constructor(
    /** Seconds between full passes (0: every round reads every ACL). */
    private readonly refreshSeconds: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** This key's ACL is read at the next round. */
  name(key: string): void {
    this.named.add(key);
  }

  /**
   * The paths whose ACL this round reads (entries not skipped), and whether it is a full pass; the keys
   * named so far count as read from here on (name them again when their read fails).
   */
  plan<E extends { key: string; skipped?: string; readers?: ObjectReaders }>(
    entries: Map<string, E>,
    owner: string | undefined,
  ): { paths: string[]; full: boolean } {
    const now = this.now();
    const full = this.lastFullPass === null || now - this.lastFullPass >= this.refreshSeconds * 1000;
    if (full) this.lastFullPass = now;
    const named = this.named;
    this.named = new Set();
    const paths = [...entries]
      .filter(([, e]) => e.skipped === undefined && (full || !e.readers || named.has(e.key) || grantsBeyondOwner(e.readers, owner)))
      .map(([p]) => p);
    return { paths, full };
  }
}
