import { readQuery, type SqlClient } from '../../../service-kit/src/index.js';
import { ENCRYPTION_ENTRY, objectMetaOf, S3Error, type EncryptionRule, type ObjectMeta, type ObjectRow } from '../../../object-model/src/index.js';
import { ObjectCommit, type CommitRequest, type CommitResult } from './commit.js';

export { BlobGoneError, CommitOutcomeUnknownError, type BlobSource, type CommitRequest, type CommitResult } from './commit.js';

/** The bucket as the data plane needs it. */
export interface BucketRef {
  id: number;
  name: string;
  owner: string;
  backend: { kind: string; [setting: string]: unknown };
  /** Its default encryption (PutBucketEncryption), when it has one: writes without encryption headers get it. */
  encryption?: EncryptionRule[];
}

/** The internal API's ObjectMeta (hack/adr/0001). */
export type { ObjectMeta } from '../../../object-model/src/index.js';

/** An object with where its bytes are. */
export interface StoredObject extends ObjectMeta {
  blobId: number;
  locator: string;
  backendKey: string;
  owner: string;
  /** A multipart object's part sizes in part order (GetObject `partNumber`); absent for one uploaded whole. */
  partSizes?: number[];
  /** Its parts' checksums in part order (an upload with a checksum algorithm: the object's algorithm). */
  partChecksums?: string[];
  /** Its encryption record (encryption/object-encryption.ts), when its bytes are encrypted. */
  encryption?: string;
}

/** An object row with where its bytes are (the reads of StoredObject). */
interface StoredObjectRow extends ObjectRow {
  blob_id: number;
  locator: string;
  backend_key: string;
  owner: string;
  part_sizes: Array<number | string> | null;
  part_checksums: string[] | null;
}

function toStoredObject(bucket: string, row: StoredObjectRow): StoredObject {
  return {
    ...objectMetaOf(bucket, row),
    blobId: Number(row.blob_id),
    locator: row.locator,
    backendKey: row.backend_key,
    owner: row.owner,
    ...(row.part_sizes ? { partSizes: row.part_sizes.map(Number) } : {}),
    ...(row.part_checksums ? { partChecksums: row.part_checksums } : {}),
    ...(row.headers?.[ENCRYPTION_ENTRY] ? { encryption: row.headers[ENCRYPTION_ENTRY] } : {}),
  };
}

/**
 * Inline blob bytes read with their object's row by objectByBucketName, taken by the inlineBlob call
 * of the same GET: a read that misses the caches then costs one statement, not two (a second round
 * trip to the database, on embedded PGlite a hop to its thread). A blob never changes under its
 * locator (every write gets a new random one), so bytes kept here are that blob's whoever takes them.
 * Taken once; at most MAX entries (a HEAD or a copy reads the row and never takes the bytes).
 */
class InlineBytesRead {
  private static readonly MAX = 64;
  private readonly entries = new Map<string, Buffer>();

  keep(backendKey: string, locator: string, bytes: Buffer): void {
    if (this.entries.size >= InlineBytesRead.MAX) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(`${backendKey}\n${locator}`, bytes);
  }

  take(backendKey: string, locator: string): Buffer | undefined {
    const id = `${backendKey}\n${locator}`;
    const bytes = this.entries.get(id);
    if (bytes) this.entries.delete(id);
    return bytes;
  }
}

/** An outbox row as the relay publishes it. */
export interface OutboxEvent {
  id: number;
  event: { id: string; type: string; occurredAt: string; payload: Record<string, unknown> };
}

/**
 * The data plane's reads and writes on the shared object-store schema (owned and migrated by the
 * control plane); commits go through ObjectCommit.
 */
export class Catalog {
  private readonly commits: ObjectCommit;
  /** Inline bytes read with their object's row, for the GET that reads them next (inlineBlob). */
  private readonly inlineRead = new InlineBytesRead();

  /** `groupCommit`, `batchesInFlight`: see ObjectCommit. */
  constructor(
    private readonly sql: SqlClient,
    opts: { groupCommit?: boolean; batchesInFlight?: number } = {},
  ) {
    this.commits = new ObjectCommit(sql, opts);
  }

  /**
   * Ready once the schema is what this catalog needs: the control plane migrates it at start and defines
   * the commit function last, so a data plane started first answers not ready until then.
   */
  async ping(): Promise<void> {
    const res = await this.sql.query<{ migrated: boolean }>("SELECT to_regprocedure('strata_commit_objects(jsonb)') IS NOT NULL AS migrated");
    if (!res.rows[0]?.migrated)
      throw new Error('the metadata schema is not migrated yet (strata_commit_objects is missing; the control plane migrates it at start)');
    // A database of 0.1.0 or earlier has a function of that name too, of another body: ready once the
    // control plane has brought it to the baseline (schema README).
    const baseline = await this.sql.query("SELECT 1 FROM schema_migrations WHERE version = '0001_baseline'");
    if (baseline.rows.length === 0)
      throw new Error('the metadata schema is not migrated yet (it is of a build before 0.2.0; the control plane migrates it at start)');
  }

  /** Read like objectByBucketName (replica-routed, as fresh as the client's default read). */
  async bucket(name: string): Promise<BucketRef> {
    return this.bucketWhere('name = $1', name, name);
  }

  /** The bucket of this row id (NoSuchBucket, named `name`, when it is gone). */
  async bucketById(id: number, name: string): Promise<BucketRef> {
    return this.bucketWhere('id = $1', id, name);
  }

  private async bucketWhere(where: 'name = $1' | 'id = $1', value: string | number, name: string): Promise<BucketRef> {
    const res = await readQuery<BucketRef & { encryption: EncryptionRule[] | null }>(
      this.sql,
      `SELECT id, name, owner, backend, encryption FROM buckets WHERE ${where}`,
      [value],
    );
    const row = res.rows[0];
    if (!row) throw new S3Error('NoSuchBucket', undefined, { BucketName: name });
    const { encryption, ...bucket } = row;
    return { ...bucket, id: Number(row.id), ...(encryption?.length ? { encryption } : {}) };
  }

  async object(bucket: BucketRef, key: string): Promise<StoredObject | undefined> {
    const res = await this.sql.query<StoredObjectRow>(
      `SELECT o.key, o.size, o.etag, o.md5, o.content_type, o.user_metadata, o.last_modified,
              o.tags, o.headers, o.part_sizes, o.part_checksums, o.owner, o.blob_id, b.locator, b.backend_key
       FROM object_info o JOIN blobs b ON b.id = o.blob_id
       WHERE o.bucket_id = $1 AND (o.bucket_id % 2) = ($1::int % 2) AND o.key = $2 AND o.state = 'NORMAL'`,
      [bucket.id, key],
    );
    const row = res.rows[0];
    return row && toStoredObject(bucket.name, row);
  }

  /**
   * The NORMAL object `key` of the bucket named `bucketName` in ONE statement (the read hot path:
   * GET/HEAD). `undefined` object when the bucket exists but the key does not; NoSuchBucket otherwise.
   * That bucket is, on a miss, the one of row `bucketId` when the caller names one (the record the
   * gateway authorised: no name is resolved again), else the name's.
   * Read through readQuery: a replica answers when it provably has every write before this call (the
   * data plane's reads are `latest`), also while the primary hangs (RoutingSqlClient).
   */
  async objectByBucketName(bucketName: string, key: string, bucketId?: number): Promise<{ bucket: BucketRef; object: StoredObject | undefined }> {
    const res = await readQuery<
      StoredObjectRow & { bucket_id: number; bucket_owner: string; bucket_backend: BucketRef['backend']; inline_data: Buffer | null }
    >(
      this.sql,
      `SELECT k.id AS bucket_id, k.owner AS bucket_owner, k.backend AS bucket_backend,
              o.key, o.size, o.etag, o.md5, o.content_type, o.user_metadata, o.last_modified,
              o.tags, o.headers, o.part_sizes, o.part_checksums, o.owner, o.blob_id, b.locator, b.backend_key, b.data AS inline_data
       FROM buckets k JOIN object_info o ON o.bucket_id = k.id AND o.key = $2 AND o.state = 'NORMAL' JOIN blobs b ON b.id = o.blob_id
       WHERE k.name = $1`,
      [bucketName, key],
    );
    const row = res.rows[0];
    if (!row) return { bucket: bucketId === undefined ? await this.bucket(bucketName) : await this.bucketById(bucketId, bucketName), object: undefined };
    if (row.inline_data) this.inlineRead.keep(row.backend_key, row.locator, row.inline_data);
    const bucket: BucketRef = { id: Number(row.bucket_id), name: bucketName, owner: row.bucket_owner, backend: row.bucket_backend };
    return { bucket, object: toStoredObject(bucketName, row) };
  }

  /**
   * Instant upload: the blob with this content that `owner` already references, by one read of the
   * (backend, md5, size) index. A client-sent hash proves nothing, so other tenants' blobs never match.
   */
  async instantCandidate(backendKey: string, md5: string, size: number, owner: string): Promise<{ id: number; locator: string } | undefined> {
    const res = await this.sql.query<{ id: number; locator: string }>(
      `SELECT b.id, b.locator FROM blobs b JOIN blob_owners o ON o.blob_id = b.id AND o.owner = $4 AND o.ref_count > 0
       WHERE b.backend_key = $1 AND b.md5 = $2 AND b.size = $3 AND b.md5 IS NOT NULL AND b.state = 'LIVE'`,
      [backendKey, md5, size, owner],
    );
    return res.rows[0] ? { id: Number(res.rows[0].id), locator: res.rows[0].locator } : undefined;
  }

  /** Commit a new version of `key`, replacing the current one (ObjectCommit.commit). */
  commitObject(req: CommitRequest): Promise<CommitResult> {
    return this.commits.commit(req);
  }

  /** Decide whether the commit that carried `eventId` took place (ObjectCommit.outcome). */
  commitOutcome(eventId: string): Promise<'committed' | 'not-committed'> {
    return this.commits.outcome(eventId);
  }

  /**
   * A stored blob whose bytes are missing gets the same content's new bytes: `locator` (and, for an
   * inline blob, `data`) replace its own, unless it changed meanwhile (freed, or repaired by another
   * writer). Answers the objects that point at it (their cached reads name the old locator), or
   * undefined when it was not repaired: then no row names `replacement.locator`.
   */
  async repairBlob(
    blobId: number,
    missingLocator: string,
    replacement: { locator: string; data?: Buffer },
  ): Promise<Array<{ bucket: string; key: string }> | undefined> {
    return this.sql.transaction(async (tx) => {
      // The replacement file may be an old orphan by now: fenced like a commit's (fenceOrphans).
      await tx.query('SELECT pg_advisory_xact_lock_shared(strata_locator_lock_key(backend_key, $2)) FROM blobs WHERE id = $1', [blobId, replacement.locator]);
      const repaired = await tx.query(
        `UPDATE blobs SET locator = $3, data = $4 WHERE id = $1 AND locator = $2 AND state = 'LIVE' AND data IS NULL
           AND NOT EXISTS (SELECT 1 FROM swept_locators s WHERE s.backend_key = blobs.backend_key AND s.locator = $3) RETURNING id`,
        [blobId, missingLocator, replacement.locator, replacement.data ?? null],
      );
      if (repaired.rows.length === 0) return undefined;
      const objects = await tx.query<{ bucket: string; key: string }>(
        "SELECT k.name AS bucket, o.key FROM object_info o JOIN buckets k ON k.id = o.bucket_id WHERE o.blob_id = $1 AND o.state <> 'DELETED'",
        [blobId],
      );
      return objects.rows;
    });
  }

  /** Blobs at reference count 0 (all of them, or those among `ids`), to be freed. */
  async unreferencedBlobs(ids?: number[]): Promise<number[]> {
    const res = ids
      ? await this.sql.query<{ id: number }>('SELECT id FROM blobs WHERE ref_count = 0 AND id = ANY($1::bigint[])', [ids])
      : await this.sql.query<{ id: number }>('SELECT id FROM blobs WHERE ref_count = 0 LIMIT 10000');
    return res.rows.map((r) => Number(r.id));
  }

  /** Claim an unreferenced blob for freeing: no reference can be added once it is FREEING. */
  async claimForFreeing(blobId: number): Promise<{ locator: string; backendKey: string; backend: BucketRef['backend'] } | undefined> {
    const res = await this.sql.query<{ locator: string; backend_key: string; backend: BucketRef['backend'] }>(
      "UPDATE blobs SET state = 'FREEING' WHERE id = $1 AND ref_count = 0 RETURNING locator, backend_key, backend",
      [blobId],
    );
    // `backend` (the config stored with the blob) lets a backend not yet in use since start be rebuilt.
    return res.rows[0] && { locator: res.rows[0].locator, backendKey: res.rows[0].backend_key, backend: res.rows[0].backend };
  }

  async forgetBlob(blobId: number): Promise<void> {
    await this.sql.query("DELETE FROM blobs WHERE id = $1 AND state = 'FREEING'", [blobId]);
  }

  /**
   * The bytes of an inline blob (blobs.data), or undefined when no row of this backend holds them.
   * A blob's bytes never change, so any replica may answer (also while the primary hangs); a replica
   * that has not replayed the blob yet is confirmed on the primary.
   */
  async inlineBlob(backendKey: string, locator: string): Promise<Buffer | undefined> {
    const kept = this.inlineRead.take(backendKey, locator);
    if (kept) return kept;
    const text = 'SELECT data FROM blobs WHERE backend_key = $1 AND locator = $2 AND data IS NOT NULL';
    const read = (opts: { stale: true } | { fresh: true }) => readQuery<{ data: Buffer }>(this.sql, text, [backendKey, locator], opts);
    return (await read({ stale: true })).rows[0]?.data ?? (await read({ fresh: true })).rows[0]?.data;
  }

  /**
   * Which of these blob files of a backend no `blobs` row names (any state): orphans, returned fenced,
   * so that they may be deleted. Each is recorded in swept_locators, which strata_commit_objects checks,
   * under its locator's exclusive advisory lock (a commit of that locator holds the shared one): a commit
   * still in flight either committed its row first, and the file is no orphan, or is refused once it
   * resumes, and never points at the deleted bytes. A locator fenced before (by a pass whose deletion
   * did not finish) is returned again.
   */
  async fenceOrphans(backendKey: string, locators: string[]): Promise<string[]> {
    if (locators.length === 0) return [];
    return this.sql.transaction(async (tx) => {
      await tx.query(
        `SELECT count(pg_advisory_xact_lock(l.h)) FROM (SELECT DISTINCT strata_locator_lock_key($1, c) AS h FROM unnest($2::text[]) c ORDER BY 1) l`,
        [backendKey, locators],
      );
      // (A statement of its own: one that committed while the locks were awaited is in its snapshot.)
      const res = await tx.query<{ locator: string }>(
        `WITH orphan AS (
           SELECT c AS locator FROM unnest($2::text[]) c WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.backend_key = $1 AND b.locator = c)
         ), fenced AS (
           INSERT INTO swept_locators (backend_key, locator) SELECT $1, orphan.locator FROM orphan ON CONFLICT DO NOTHING
         )
         SELECT locator FROM orphan`,
        [backendKey, locators],
      );
      return res.rows.map((r) => r.locator);
    });
  }

  /**
   * Forgets the fences (swept_locators) of backend `backendKey` recorded before `before`; answers how
   * many. Only for fences whose files are gone and whose late commits can no longer come (CleanupJob).
   */
  async pruneSweptLocators(backendKey: string, before: Date): Promise<number> {
    const res = await this.sql.query('DELETE FROM swept_locators WHERE backend_key = $1 AND swept_at < $2', [backendKey, before]);
    return res.rowCount ?? 0;
  }

  /**
   * Claims the oldest unsent outbox events that no relay holds (no claim, or one that ran out by `now`)
   * until `claimUntil`, oldest first. Rows another relay is claiming at this moment are skipped, not
   * awaited, so concurrent relays take disjoint batches. An embedded database (PGlite) belongs to one
   * process, so its one relay reads the rows without claiming them (a claim is a row write per event,
   * ~0.08 ms of PGlite's thread per small PUT: hack/bench/measurements.md, integration of 2026-12-05).
   */
  async claimUnsentEvents(limit: number, now: Date, claimUntil: Date): Promise<OutboxEvent[]> {
    type Row = { id: number; event_id: string; type: string; payload: Record<string, unknown>; created_at: Date };
    const res =
      this.sql.kind === 'pglite'
        ? await this.sql.query<Row>('SELECT id, event_id, type, payload, created_at FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT $1', [limit])
        : await this.sql.query<Row>(
            `WITH free AS (
               SELECT id FROM outbox WHERE sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= $2) ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
             )
             UPDATE outbox o SET claimed_until = $3 FROM free WHERE o.id = free.id RETURNING o.id, o.event_id, o.type, o.payload, o.created_at`,
            [limit, now, claimUntil],
          );
    return res.rows
      .map((r) => ({
        id: Number(r.id),
        event: { id: r.event_id, type: r.type, occurredAt: new Date(r.created_at).toISOString(), payload: r.payload },
      }))
      .sort((a, b) => a.id - b.id);
  }

  /**
   * Gives up the claims on outbox rows left unsent (a relay's pass stopped at a failed publish), so any relay
   * retries them at once. Only the claims this pass set (`claimUntil`): a row whose claim ran out and another
   * relay took meanwhile stays that relay's.
   */
  async releaseClaims(ids: number[], claimUntil: Date): Promise<void> {
    if (ids.length) {
      await this.sql.query('UPDATE outbox SET claimed_until = NULL WHERE id = ANY($1::bigint[]) AND sent_at IS NULL AND claimed_until = $2', [ids, claimUntil]);
    }
  }

  async markSent(ids: number[], now: Date): Promise<void> {
    if (ids.length) await this.sql.query('UPDATE outbox SET sent_at = $2, attempts = attempts + 1 WHERE id = ANY($1::bigint[])', [ids, now]);
  }

  async markAttempt(id: number): Promise<void> {
    await this.sql.query('UPDATE outbox SET attempts = attempts + 1 WHERE id = $1', [id]);
  }

  async outboxBacklog(): Promise<number> {
    const res = await this.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL');
    return Number(res.rows[0].n);
  }
}
