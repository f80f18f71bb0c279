import { isUniqueViolation, uuidV7, type SqlClient, type SqlExecutor } from '../../../service-kit/src/index.js';
import { S3Error, etagMatches, type StoredHeaders, type Tag } from '../../../object-model/src/index.js';
import { GroupCommit } from './group-commit.js';

/** The bucket as the data plane needs it. */
export interface BucketRef {
  id: number;
  name: string;
  owner: string;
  backend: { kind: string; [setting: string]: unknown };
}

/** The internal API's ObjectMeta (hack/adr/0001). */
export interface ObjectMeta {
  bucket: string;
  key: string;
  size: number;
  etag: string;
  md5: string | null;
  contentType: string;
  userMetadata: Record<string, string>;
  lastModified: string;
  /** The object's tags; absent when it has none. */
  tags?: Tag[];
  /** Its stored headers (Cache-Control, ..., its checksum); absent when it has none. */
  headers?: StoredHeaders;
}

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
}

export interface Preconditions {
  ifMatch?: string;
  ifNoneMatch?: string;
}

/** The bytes the new object points at: a blob just written, or one already stored. */
export type BlobSource =
  | { kind: 'new'; backendKey: string; backend: unknown; locator: string; md5: string | null; size: number; /** An inline blob's bytes (StoredBlob.inline). */ data?: Buffer }
  | { kind: 'existing'; blobId: number };

export interface CommitRequest {
  bucket: BucketRef;
  key: string;
  owner: string;
  blob: BlobSource;
  etag: string;
  md5: string | null;
  size: number;
  contentType: string;
  userMetadata: Record<string, string>;
  /** The new version's tags (x-amz-tagging); none when absent or empty. */
  tags?: Tag[];
  /** The new version's stored headers; none when absent. */
  headers?: StoredHeaders;
  /** A multipart object's part sizes in part order; none for an object uploaded whole. */
  partSizes?: number[];
  /** Its parts' checksums in part order, when they have them. */
  partChecksums?: string[];
  conditions?: Preconditions;
  now: Date;
}

export interface CommitResult {
  meta: ObjectMeta;
  /** False when a new blob's content was already stored: the caller deletes the bytes it wrote. */
  newBlobKept: boolean;
  /** Blobs whose last reference went away (the replaced object's): free their bytes. */
  unreferencedBlobIds: number[];
}

/** The existing blob was being freed between lookup and commit. */
export class BlobGoneError extends Error {}

/** Partition pruning on object_info (partitioned by LIST (bucket_id % 2)). */
const SAME_PARTITION = '(bucket_id % 2) = ($1::int % 2)';
const OBJECT_COLUMNS = 'key, size, etag, md5, content_type, user_metadata, last_modified, tags, headers';
const COMMIT_RETRIES = 5;

interface ObjectRow {
  key: string;
  size: number;
  etag: string;
  md5: string | null;
  content_type: string;
  user_metadata: Record<string, string>;
  last_modified: Date;
  tags: Tag[] | null;
  headers: StoredHeaders | null;
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
    ...toMeta(bucket, row),
    blobId: Number(row.blob_id),
    locator: row.locator,
    backendKey: row.backend_key,
    owner: row.owner,
    ...(row.part_sizes ? { partSizes: row.part_sizes.map(Number) } : {}),
    ...(row.part_checksums ? { partChecksums: row.part_checksums } : {}),
  };
}

function toMeta(bucket: string, row: ObjectRow): ObjectMeta {
  return {
    bucket,
    key: row.key,
    size: Number(row.size),
    etag: row.etag,
    md5: row.md5,
    contentType: row.content_type,
    userMetadata: row.user_metadata ?? {},
    lastModified: new Date(row.last_modified).toISOString(),
    ...(row.tags?.length ? { tags: row.tags } : {}),
    ...(row.headers ? { headers: row.headers } : {}),
  };
}

/** Tags as the commit stores them: NULL for none. */
function storedTags(tags: Tag[] | undefined): string | null {
  return tags?.length ? JSON.stringify(tags) : null;
}

/** Headers as the commit stores them: NULL for none. */
function storedHeaders(headers: StoredHeaders | undefined): string | null {
  return headers && Object.keys(headers).length ? JSON.stringify(headers) : null;
}

/** What strata_commit_object answers (migration 0003). */
interface CommitRow {
  r_status: string;
  r_blob_id: number;
  r_locator: string | null;
  r_replaced_size: number | null;
  r_unreferenced_blob_id: number | null;
}

/** The object.created event's payload (the function adds replacedSize). */
function commitPayload(req: Pick<CommitRequest, 'bucket' | 'key' | 'size' | 'etag' | 'contentType' | 'owner'>) {
  return { bucket: req.bucket.name, bucketId: req.bucket.id, key: req.key, size: req.size, etag: req.etag, contentType: req.contentType, owner: req.owner };
}

/** A commit function's row as the commit's result, or its refusal as the error. */
function commitResult(req: CommitRequest, row: CommitRow): CommitResult {
  const { bucket, key, now, blob } = req;
  if (row.r_status === 'no_bucket') throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
  if (row.r_status === 'blob_gone') throw new BlobGoneError(`blob ${blob.kind === 'existing' ? blob.blobId : '?'} is being freed`);
  const meta: ObjectMeta = {
    bucket: bucket.name,
    key,
    size: req.size,
    etag: req.etag,
    md5: req.md5,
    contentType: req.contentType,
    userMetadata: req.userMetadata,
    lastModified: now.toISOString(),
    ...(req.tags?.length ? { tags: req.tags } : {}),
    ...(req.headers && Object.keys(req.headers).length ? { headers: req.headers } : {}),
  };
  return {
    meta,
    newBlobKept: blob.kind === 'new' && row.r_locator === blob.locator,
    unreferencedBlobIds: row.r_unreferenced_blob_id !== null ? [Number(row.r_unreferenced_blob_id)] : [],
  };
}

/**
 * The data plane's reads and writes on the shared object-store schema (owned and migrated by the
 * control plane). An object's metadata, its blob references and its outbox event are committed in
 * one transaction.
 */
export class Catalog {
  /** Whether strata_commit_object (migration 0003) exists: undefined until the first commit tells. */
  private commitFunction: boolean | undefined;
  /** Whether strata_commit_objects (migration 0004) exists: undefined until the first batch tells. */
  private batchFunction: boolean | undefined;
  /** Concurrent commits batched into one statement; only on PGlite (see `groupCommit`). */
  private readonly commits: GroupCommit<CommitRequest, CommitResult> | undefined;

  /**
   * `groupCommit` (default: on PGlite only) batches concurrent commits. PGlite has one connection and
   * runs one statement at a time, so commits queue anyway and a batch only saves work; on PostgreSQL
   * they run in parallel on the pool, and one transaction holding many keys' locks could deadlock
   * with another batch.
   */
  constructor(
    private readonly sql: SqlClient,
    opts: { groupCommit?: boolean } = {},
  ) {
    if (opts.groupCommit ?? sql.kind === 'pglite') this.commits = new GroupCommit((reqs) => this.commitBatch(reqs));
  }

  async ping(): Promise<void> {
    await this.sql.query('SELECT 1 FROM object_info WHERE false');
  }

  async bucket(name: string): Promise<BucketRef> {
    const res = await this.sql.query<BucketRef>('SELECT id, name, owner, backend FROM buckets WHERE name = $1', [name]);
    if (!res.rows[0]) throw new S3Error('NoSuchBucket', undefined, { BucketName: name });
    return { ...res.rows[0], id: Number(res.rows[0].id) };
  }

  async object(bucket: BucketRef, key: string): Promise<StoredObject | undefined> {
    const res = await this.sql.query<StoredObjectRow>(
      `SELECT o.key, o.size, o.etag, o.md5, o.content_type, o.user_metadata, o.last_modified, o.tags, o.headers, o.part_sizes, o.part_checksums, o.owner, o.blob_id, b.locator, b.backend_key
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
   */
  async objectByBucketName(bucketName: string, key: string): Promise<{ bucket: BucketRef; object: StoredObject | undefined }> {
    const res = await this.sql.query<StoredObjectRow & { bucket_id: number; bucket_owner: string; bucket_backend: BucketRef['backend'] }>(
      `SELECT k.id AS bucket_id, k.owner AS bucket_owner, k.backend AS bucket_backend,
              o.key, o.size, o.etag, o.md5, o.content_type, o.user_metadata, o.last_modified, o.tags, o.headers, o.part_sizes, o.part_checksums, o.owner, o.blob_id, b.locator, b.backend_key
       FROM buckets k JOIN object_info o ON o.bucket_id = k.id AND o.key = $2 AND o.state = 'NORMAL' JOIN blobs b ON b.id = o.blob_id
       WHERE k.name = $1`,
      [bucketName, key],
    );
    const row = res.rows[0];
    if (!row) return { bucket: await this.bucket(bucketName), object: undefined };
    const bucket: BucketRef = { id: Number(row.bucket_id), name: bucketName, owner: row.bucket_owner, backend: row.bucket_backend };
    return { bucket, object: toStoredObject(bucketName, row) };
  }

  /**
   * Instant upload: the blob with this content that `owner` already references, by one read of the
   * (backend, md5, size) index. A client-sent hash proves nothing, so other tenants' blobs never match.
   */
  async instantCandidate(backendKey: string, md5: string, size: number, owner: string): Promise<number | undefined> {
    const res = await this.sql.query<{ id: number }>(
      `SELECT b.id FROM blobs b JOIN blob_owners o ON o.blob_id = b.id AND o.owner = $4 AND o.ref_count > 0
       WHERE b.backend_key = $1 AND b.md5 = $2 AND b.size = $3 AND b.md5 IS NOT NULL AND b.state = 'LIVE'`,
      [backendKey, md5, size, owner],
    );
    return res.rows[0] ? Number(res.rows[0].id) : undefined;
  }

  /** Commit a new version of `key` (replacing the current one), retrying when a concurrent write got in the way. */
  async commitObject(req: CommitRequest): Promise<CommitResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        // Conditional writes and multipart completions (part sizes) take the transaction: the commit
        // functions know neither (both are rare next to plain PUTs).
        if (!req.conditions && !req.partSizes && this.commitFunction !== false) {
          try {
            const result = await (this.commits ? this.commits.submit(req) : this.commitByFunction(req));
            this.commitFunction = true;
            return result;
          } catch (err) {
            // A schema older than migration 0003 (the control plane not yet upgraded): the transaction.
            if ((err as { code?: string } | null)?.code !== '42883' || this.commitFunction) throw err;
            this.commitFunction = false;
          }
        }
        return await this.sql.transaction((tx) => this.commitIn(tx, req));
      } catch (err) {
        if (!isRetryable(err) || attempt >= COMMIT_RETRIES) throw err;
      }
    }
  }

  /** The commit as ONE statement: strata_commit_object (migration 0003; its plans are cached by PL/pgSQL). */
  private async commitByFunction(req: CommitRequest): Promise<CommitResult> {
    const { bucket, key, blob } = req;
    const res = await this.sql.query<CommitRow>(
      'SELECT * FROM strata_commit_object($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)',
      [
        bucket.id,
        key,
        req.owner,
        blob.kind === 'existing' ? blob.blobId : null,
        blob.kind === 'new' ? blob.backendKey : null,
        blob.kind === 'new' ? JSON.stringify(blob.backend) : null,
        blob.kind === 'new' ? blob.locator : null,
        blob.kind === 'new' ? blob.md5 : null,
        blob.kind === 'new' ? blob.size : null,
        req.size,
        req.etag,
        req.md5,
        req.contentType,
        JSON.stringify(req.userMetadata),
        req.now,
        uuidV7(),
        JSON.stringify(commitPayload(req)),
        blob.kind === 'new' ? (blob.data ?? null) : null,
        storedTags(req.tags),
        storedHeaders(req.headers),
      ],
    );
    return commitResult(req, res.rows[0]!);
  }

  /**
   * Several commits in ONE statement and transaction (strata_commit_objects, migration 0004). If the
   * statement fails, nothing of it stays and each commit runs on its own, so that a bad one fails
   * alone.
   */
  private async commitBatch(reqs: CommitRequest[]): Promise<PromiseSettledResult<CommitResult>[]> {
    const oneByOne = () => Promise.allSettled(reqs.map((req) => this.commitByFunction(req)));
    if (reqs.length === 1 || this.batchFunction === false) return oneByOne();
    const items = reqs.map(({ bucket, key, blob, ...req }) => ({
      bucketId: bucket.id,
      key,
      owner: req.owner,
      ...(blob.kind === 'existing'
        ? { existingBlobId: blob.blobId }
        : { backendKey: blob.backendKey, backend: blob.backend, locator: blob.locator, blobMd5: blob.md5, blobSize: blob.size, ...(blob.data ? { data: blob.data.toString('base64') } : {}) }),
      size: req.size,
      etag: req.etag,
      md5: req.md5,
      contentType: req.contentType,
      userMetadata: req.userMetadata,
      ...(req.tags?.length ? { tags: req.tags } : {}),
      ...(req.headers && Object.keys(req.headers).length ? { headers: req.headers } : {}),
      now: req.now.toISOString(),
      eventId: uuidV7(),
      payload: commitPayload({ bucket, key, ...req }),
    }));
    let rows: Array<CommitRow & { r_index: number }>;
    try {
      rows = (await this.sql.query<CommitRow & { r_index: number }>('SELECT * FROM strata_commit_objects($1)', [JSON.stringify(items)])).rows;
      this.batchFunction = true;
    } catch (err) {
      // A schema older than migration 0004 (the control plane not yet upgraded): one by one for good.
      if ((err as { code?: string } | null)?.code === '42883' && !this.batchFunction) this.batchFunction = false;
      return oneByOne();
    }
    const byIndex = new Map(rows.map((row) => [Number(row.r_index), row]));
    return reqs.map((req, i): PromiseSettledResult<CommitResult> => {
      try {
        const row = byIndex.get(i + 1);
        if (!row) throw new Error(`the batch commit returned no row for item ${i + 1}`);
        return { status: 'fulfilled', value: commitResult(req, row) };
      } catch (reason) {
        return { status: 'rejected', reason };
      }
    });
  }

  /**
   * The commit in five statements (PGlite runs every statement on the one Node.js thread, so the
   * small-object PUT pays for each): lock, blob reference, replaced version, new version + outbox row,
   * plus one more for If-Match / If-None-Match.
   */
  private async commitIn(tx: SqlExecutor, req: CommitRequest): Promise<CommitResult> {
    const { bucket, key, now } = req;
    // Writers of one key queue on the advisory lock, before touching any blob row: they would otherwise
    // lock the old and new blobs in opposite orders and deadlock (PostgreSQL resolves that only after a
    // second). Share lock on the bucket row: a bucket delete (row lock in the control plane) and this
    // write cannot interleave. (Their order does not matter: a bucket delete takes no advisory lock.)
    const alive = await tx.query<{ id: number | null }>(
      'SELECT pg_advisory_xact_lock($1::int, hashtext($2)) AS locked, (SELECT id FROM buckets WHERE id = $1 FOR SHARE) AS id',
      [bucket.id, key],
    );
    if (alive.rows[0]?.id === null || alive.rows[0]?.id === undefined) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
    if (req.conditions) {
      const current = await tx.query<{ etag: string }>(
        `SELECT etag FROM object_info WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL' FOR UPDATE`,
        [bucket.id, key],
      );
      checkPreconditions(req.conditions, current.rows[0]?.etag, key);
    }

    // One more reference on the blob and on its owner row, in one statement.
    let blobId: number;
    let newBlobKept = false;
    const addOwner = (blobRel: string, ownerParam: string) =>
      `, o AS (INSERT INTO blob_owners (blob_id, owner, ref_count) SELECT id, ${ownerParam}, 1 FROM ${blobRel}
         ON CONFLICT (blob_id, owner) DO UPDATE SET ref_count = blob_owners.ref_count + 1)`;
    if (req.blob.kind === 'new') {
      const b = req.blob;
      const res = await tx.query<{ id: number; locator: string }>(
        `WITH b AS (INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count, created_at, data) VALUES ($1, $2, $3, $4, $5, 1, $6, $8)
           ON CONFLICT (backend_key, md5, size) WHERE md5 IS NOT NULL AND state = 'LIVE'
           DO UPDATE SET ref_count = blobs.ref_count + 1 RETURNING id, locator)${addOwner('b', '$7')}
         SELECT id, locator FROM b`,
        [b.backendKey, JSON.stringify(b.backend), b.locator, b.md5, b.size, now, req.owner, b.data ?? null],
      );
      blobId = Number(res.rows[0].id);
      newBlobKept = res.rows[0].locator === b.locator;
    } else {
      const res = await tx.query<{ id: number }>(
        `WITH b AS (UPDATE blobs SET ref_count = ref_count + 1 WHERE id = $1 AND state = 'LIVE' RETURNING id)${addOwner('b', '$2')}
         SELECT id FROM b`,
        [req.blob.blobId, req.owner],
      );
      if (!res.rows[0]) throw new BlobGoneError(`blob ${req.blob.blobId} is being freed`);
      blobId = req.blob.blobId;
    }

    // The replaced version becomes DELETED and releases its references (blob and owner), in one statement.
    const replaced = await tx.query<{ blob_id: number; size: number; ref_count: number | null }>(
      `WITH r AS (UPDATE object_info SET state = 'DELETED', deleted_at = $3
         WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL' RETURNING blob_id, owner, size),
       b AS (UPDATE blobs SET ref_count = GREATEST(blobs.ref_count - 1, 0) FROM r WHERE blobs.id = r.blob_id RETURNING blobs.id, blobs.ref_count),
       o AS (UPDATE blob_owners SET ref_count = GREATEST(blob_owners.ref_count - 1, 0) FROM r WHERE blob_owners.blob_id = r.blob_id AND blob_owners.owner = r.owner)
       SELECT r.blob_id, r.size, b.ref_count FROM r LEFT JOIN b ON b.id = r.blob_id`,
      [bucket.id, key, now],
    );
    const unreferencedBlobIds = replaced.rows.filter((r) => r.ref_count !== null && Number(r.ref_count) === 0).map((r) => Number(r.blob_id));

    // The new version and its outbox event, in one statement.
    const payload = {
      bucket: bucket.name,
      bucketId: bucket.id,
      key,
      size: req.size,
      etag: req.etag,
      contentType: req.contentType,
      owner: req.owner,
      replacedSize: replaced.rows[0] ? Number(replaced.rows[0].size) : null,
    };
    const inserted = await tx.query<ObjectRow>(
      `WITH n AS (INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, user_metadata, owner, last_modified, tags, headers, part_sizes, part_checksums)
         VALUES ($1, $2, 'NORMAL', $3, $4, $5, $6, $7, $8, $9, $10, $13, $14, $15, $16) RETURNING ${OBJECT_COLUMNS}),
       e AS (INSERT INTO outbox (event_id, type, payload, created_at) VALUES ($11, 'object.created', $12, $10))
       SELECT * FROM n`,
      [bucket.id, key, blobId, req.size, req.etag, req.md5, req.contentType, JSON.stringify(req.userMetadata), req.owner, now, uuidV7(), JSON.stringify(payload), storedTags(req.tags), storedHeaders(req.headers), req.partSizes ?? null, req.partSizes && req.partChecksums ? req.partChecksums : null],
    );
    const meta = toMeta(bucket.name, inserted.rows[0]);
    return { meta, newBlobKept, unreferencedBlobIds };
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

  /** The bytes of an inline blob (migration 0006), or undefined when no row of this backend holds them. */
  async inlineBlob(backendKey: string, locator: string): Promise<Buffer | undefined> {
    const res = await this.sql.query<{ data: Buffer }>('SELECT data FROM blobs WHERE backend_key = $1 AND locator = $2 AND data IS NOT NULL', [backendKey, locator]);
    return res.rows[0]?.data;
  }

  /** Which of these locators a `blobs` row of this backend names (any state): the rest are orphan files. */
  async knownLocators(backendKey: string, locators: string[]): Promise<Set<string>> {
    if (locators.length === 0) return new Set();
    const res = await this.sql.query<{ locator: string }>('SELECT locator FROM blobs WHERE backend_key = $1 AND locator = ANY($2::text[])', [backendKey, locators]);
    return new Set(res.rows.map((r) => r.locator));
  }

  /** The oldest unsent outbox events. */
  async unsentEvents(limit: number): Promise<Array<{ id: number; event: { id: string; type: string; occurredAt: string; payload: Record<string, unknown> } }>> {
    const res = await this.sql.query<{ id: number; event_id: string; type: string; payload: Record<string, unknown>; created_at: Date }>(
      'SELECT id, event_id, type, payload, created_at FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT $1',
      [limit],
    );
    return res.rows.map((r) => ({
      id: Number(r.id),
      event: { id: r.event_id, type: r.type, occurredAt: new Date(r.created_at).toISOString(), payload: r.payload },
    }));
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

/**
 * A concurrent write won the key (unique violation), or two commits took blob row locks in opposite
 * orders (deadlock, one is aborted): the whole transaction can simply run again.
 */
function isRetryable(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return isUniqueViolation(err) || code === '40P01' || code === '40001';
}

/** If-Match / If-None-Match of a write against the key's current ETag (undefined: no object); PreconditionFailed or NoSuchKey as S3. */
export function checkPreconditions(c: Preconditions | undefined, currentEtag: string | undefined, key: string): void {
  if (!c) return;
  if (c.ifMatch !== undefined) {
    if (currentEtag === undefined) throw new S3Error('NoSuchKey', undefined, { Key: key });
    if (!etagMatches(c.ifMatch, currentEtag)) throw new S3Error('PreconditionFailed', undefined, { Condition: 'If-Match' });
  }
  if (c.ifNoneMatch !== undefined && currentEtag !== undefined && etagMatches(c.ifNoneMatch, currentEtag)) {
    throw new S3Error('PreconditionFailed', undefined, { Condition: 'If-None-Match' });
  }
}
