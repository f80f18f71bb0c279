import { v7 as uuidv7 } from 'uuid';
import { isUniqueViolation, readQuery, type SqlClient, type SqlExecutor } from '../../../service-kit/src/index.js';
import { S3Error, etagMatches, type CorsRule, type LifecycleRule, type StoredHeaders, type Tag } from '../../../object-model/src/index.js';
import type {
  BackendConfig,
  Bucket,
  BucketNameHold,
  BucketConfigKind,
  BucketConfigs,
  BucketStats,
  DeleteConditions,
  ExpirySelection,
  ListPage,
  ListQuery,
  MetadataStore,
  ObjectMeta,
  ObjectPart,
  PurgeResult,
  RecycleBinPage,
  RecycleBinQuery,
  StoredUser,
  StrataEvent,
} from './store.js';

/**
 * Appended to a prefix, this string sorts after every key that starts with the prefix: keys are at
 * most 1024 bytes, and U+10FFFF (F4 8F BF BF) is the greatest UTF-8 sequence, so 257 of them are
 * greater than any possible rest of a key. Keeps "skip this common prefix" an index range scan.
 */
const AFTER_ALL = '\u{10FFFF}'.repeat(257);

/** Partition pruning: the planner can only skip the other partition when the partition expression appears. */
const SAME_PARTITION = '(bucket_id % 2) = ($1::int % 2)';

/** The column of each bucket configuration (names from this fixed map only: they go into SQL text). */
const CONFIG_COLUMNS: Record<BucketConfigKind, string> = { lifecycle: 'lifecycle', cors: 'cors', tags: 'tags' };

/** Objects purged per transaction. */
const PURGE_BATCH = 500;
/*
 * BATCH_ONCE: a batch is chosen as `id = ANY (ARRAY(SELECT id ... LIMIT n FOR UPDATE SKIP LOCKED))`, never
 * `id IN (SELECT ...)`. Without statistics (PGlite before its first VACUUM ANALYZE, or a table that grew
 * since) the IN form was planned as a nested loop that ran the subquery again for every live row, and each
 * run skipped the rows the statement had just updated: the lifecycle expiry of a 20 000-object bucket took
 * 295 s and updated all 20 000 rows in one "batch" of 500. ARRAY(...) runs once (an InitPlan): 0.15 s, 500.
 */

interface ObjectRow {
  key: string;
  size: number | string;
  etag: string;
  md5: string | null;
  content_type: string;
  user_metadata: Record<string, string>;
  last_modified: Date;
  tags: Tag[] | null;
  headers: StoredHeaders | null;
}

const OBJECT_COLUMNS = 'key, size, etag, md5, content_type, user_metadata, last_modified, tags, headers';

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

interface BucketRow {
  id: number;
  name: string;
  owner: string;
  backend: BackendConfig;
  created_at: Date;
  lifecycle?: LifecycleRule[] | null;
  cors?: CorsRule[] | null;
}

function toBucket(row: BucketRow): Bucket {
  const bucket: Bucket = { id: Number(row.id), name: row.name, owner: row.owner, backend: row.backend, createdAt: new Date(row.created_at).toISOString() };
  if (row.lifecycle) bucket.lifecycle = row.lifecycle;
  if (row.cors) bucket.cors = row.cors;
  return bucket;
}

interface UserRow {
  username: string;
  password_hash: string;
  access_key: string;
  secret_key_enc: string;
  is_root: boolean;
  created_at: Date;
}

function toUser(row: UserRow): StoredUser {
  return {
    username: row.username,
    passwordHash: row.password_hash,
    accessKey: row.access_key,
    secretKeyEnc: row.secret_key_enc,
    isRoot: row.is_root,
    createdAt: new Date(row.created_at).toISOString(),
  };
}

/** Write an event to the outbox inside the caller's transaction; the data plane's relay publishes it. */
export async function insertOutboxEvent(tx: SqlExecutor, type: string, payload: Record<string, unknown>, now: Date): Promise<string> {
  const id = uuidv7();
  await tx.query('INSERT INTO outbox (event_id, type, payload, created_at) VALUES ($1, $2, $3, $4)', [id, type, JSON.stringify(payload), now]);
  return id;
}

/** How an object event moves its bucket's counts; undefined for the other events. */
function objectEventDelta(event: StrataEvent): { objects: number; bytes: number } | undefined {
  const p = event.payload as { size?: number; replacedSize?: number | null };
  const size = Number(p.size ?? 0);
  switch (event.type) {
    case 'object.created':
      return p.replacedSize === null || p.replacedSize === undefined ? { objects: 1, bytes: size } : { objects: 0, bytes: size - Number(p.replacedSize) };
    case 'object.recycled':
      return { objects: -1, bytes: -size };
    case 'object.restored':
      return { objects: 1, bytes: size };
    default:
      return undefined;
  }
}

/** Release one reference per row on blobs and blob_owners; answers the blobs nothing references any more. */
async function releaseBlobRefs(tx: SqlExecutor, refs: Array<{ blob_id: number | string; owner: string }>): Promise<number[]> {
  const perBlob = new Map<number, number>();
  const perOwner = new Map<string, { blobId: number; owner: string; n: number }>();
  for (const r of refs) {
    const blobId = Number(r.blob_id);
    perBlob.set(blobId, (perBlob.get(blobId) ?? 0) + 1);
    const k = `${blobId}\0${r.owner}`;
    const entry = perOwner.get(k) ?? { blobId, owner: r.owner, n: 0 };
    entry.n++;
    perOwner.set(k, entry);
  }
  const unreferenced: number[] = [];
  for (const [blobId, n] of [...perBlob].sort((a, b) => a[0] - b[0])) {
    const res = await tx.query<{ ref_count: number }>('UPDATE blobs SET ref_count = GREATEST(ref_count - $2, 0) WHERE id = $1 RETURNING ref_count', [blobId, n]);
    if (res.rows[0] && Number(res.rows[0].ref_count) === 0) unreferenced.push(blobId);
  }
  for (const { blobId, owner, n } of perOwner.values()) {
    await tx.query('UPDATE blob_owners SET ref_count = GREATEST(ref_count - $3, 0) WHERE blob_id = $1 AND owner = $2', [blobId, owner, n]);
  }
  return unreferenced;
}

/** Create and delete of one bucket name take turns (the hold written by a delete is seen by a create). */
async function lockBucketName(tx: SqlExecutor, name: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtext('strata.bucket-name:' || $1))", [name]);
}

/** An object.recycled event's payload (as DeleteObject has always written it) from a recycled row `x`; $1 bucket id, $5 bucket name. */
const RECYCLED_PAYLOAD = "jsonb_build_object('bucket', $5::text, 'bucketId', $1::int, 'key', x.key, 'size', x.size, 'owner', x.owner)";

/**
 * The NORMAL object of one key → RECYCLED with its object.recycled event, in ONE statement (atomic
 * without a transaction: no BEGIN/COMMIT round trips); whether there was one. Written for one key
 * (`key = $2`) so that its plan is cached: the many-keys form is planned anew on every call (~2 ms on
 * PGlite, four times its run).
 */
async function recycleKey(sql: SqlExecutor, bucket: Bucket, key: string, now: Date): Promise<boolean> {
  const res = await sql.query(
    `WITH recycled AS (
       UPDATE object_info SET state = 'RECYCLED', recycled_at = $3
       WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'
       RETURNING key, size, owner
     ), events AS (
       INSERT INTO outbox (event_id, type, payload, created_at) SELECT $4, 'object.recycled', ${RECYCLED_PAYLOAD}, $3 FROM recycled x
     )
     SELECT key FROM recycled`,
    [bucket.id, key, now, uuidv7(), bucket.name],
  );
  return res.rows.length > 0;
}

/**
 * recycleKey for many keys in one statement (DeleteObjects); answers the keys that had an object.
 * The keys probe the live-key index directly: locking them first in a subquery (`id IN (SELECT ...
 * FOR UPDATE)`) was planned, without statistics (PGlite before its first VACUUM ANALYZE), as a
 * nested loop running that subquery once per live key of the bucket — 13 s for 1000 keys of 3000.
 * Two of these over the same keys may deadlock on PostgreSQL; the caller runs it again.
 */
async function recycleKeys(sql: SqlExecutor, bucket: Bucket, keys: string[], now: Date): Promise<string[]> {
  const res = await sql.query<{ key: string }>(
    `WITH recycled AS (
       UPDATE object_info SET state = 'RECYCLED', recycled_at = $3
       WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = ANY ($2::text[]) AND state = 'NORMAL'
       RETURNING key, size, owner
     ), numbered AS (
       SELECT r.*, row_number() OVER (ORDER BY r.key) AS n FROM recycled r
     ), events AS (
       INSERT INTO outbox (event_id, type, payload, created_at)
       SELECT e.id, 'object.recycled', ${RECYCLED_PAYLOAD}, $3
       FROM numbered x JOIN unnest($4::text[]) WITH ORDINALITY AS e(id, n) ON e.n = x.n
       ORDER BY x.n
     )
     SELECT key FROM numbered ORDER BY n`,
    [bucket.id, keys, now, keys.map(() => uuidv7()), bucket.name],
  );
  return res.rows.map((r) => r.key);
}

/** Run a transaction again when PostgreSQL aborted it for a deadlock or a serialization conflict. */
async function retryOnConflict<T>(run: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await run();
    } catch (err) {
      const code = (err as { code?: string } | null)?.code;
      if ((code !== '40P01' && code !== '40001') || i >= attempts) throw err;
    }
  }
}

interface ContinuationToken {
  /** The last key or common prefix returned. */
  k: string;
  /** True when `k` is a common prefix (everything under it was listed). */
  g: boolean;
}

export function encodeToken(t: ContinuationToken): string {
  return Buffer.from(JSON.stringify(t), 'utf8').toString('base64url');
}

export function decodeToken(token: string): ContinuationToken | undefined {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as ContinuationToken;
    return typeof t.k === 'string' && typeof t.g === 'boolean' ? t : undefined;
  } catch {
    return undefined;
  }
}

/** The metadata store on SQL; the same statements run on PostgreSQL and PGlite. */
export class SqlMetadataStore implements MetadataStore {
  constructor(private readonly sql: SqlClient) {}

  async ping(): Promise<void> {
    await this.sql.query('SELECT 1 FROM schema_migrations LIMIT 1');
  }

  async insertUser(user: Omit<StoredUser, 'createdAt' | 'isRoot'>): Promise<StoredUser> {
    const res = await this.sql.query<UserRow>(
      `INSERT INTO users (username, password_hash, access_key, secret_key_enc) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING RETURNING *`,
      [user.username, user.passwordHash, user.accessKey, user.secretKeyEnc],
    );
    if (!res.rows[0]) throw Object.assign(new Error(`user ${user.username} exists`), { code: '23505' });
    return toUser(res.rows[0]);
  }

  async upsertRootUser(user: Omit<StoredUser, 'createdAt' | 'isRoot'>): Promise<void> {
    await this.sql.query(
      `INSERT INTO users (username, password_hash, access_key, secret_key_enc, is_root) VALUES ($1, $2, $3, $4, true)
       ON CONFLICT (username) DO UPDATE SET password_hash = EXCLUDED.password_hash, access_key = EXCLUDED.access_key,
         secret_key_enc = EXCLUDED.secret_key_enc, is_root = true`,
      [user.username, user.passwordHash, user.accessKey, user.secretKeyEnc],
    );
  }

  async getUser(username: string): Promise<StoredUser | undefined> {
    const res = await this.sql.query<UserRow>('SELECT * FROM users WHERE username = $1', [username]);
    return res.rows[0] && toUser(res.rows[0]);
  }

  async getUserByAccessKey(accessKey: string): Promise<StoredUser | undefined> {
    const res = await this.sql.query<UserRow>('SELECT * FROM users WHERE access_key = $1', [accessKey]);
    return res.rows[0] && toUser(res.rows[0]);
  }

  async createBucket(name: string, owner: string, backend: BackendConfig, nameHold: BucketNameHold): Promise<{ bucket: Bucket; created: boolean }> {
    const heldSince = new Date(nameHold.now.getTime() - nameHold.ms);
    for (;;) {
      try {
        return await this.sql.transaction(async (tx) => {
          await lockBucketName(tx, name);
          // Expired holds go first (this keeps the table to the names deleted within the hold), then a
          // name another account deleted within the hold is refused.
          await tx.query('DELETE FROM bucket_name_holds WHERE deleted_at < $1', [heldSince]);
          const held = await tx.query<{ owner: string; deleted_at: Date }>('SELECT owner, deleted_at FROM bucket_name_holds WHERE name = $1', [name]);
          const hold = held.rows[0];
          if (hold && hold.owner !== owner) {
            const until = new Date(new Date(hold.deleted_at).getTime() + nameHold.ms);
            throw new S3Error('OperationAborted', `The bucket name was released moments ago and cannot be taken by another account yet; try again after ${until.toISOString()}.`, { BucketName: name });
          }
          const res = await tx.query<BucketRow>(
            'INSERT INTO buckets (name, owner, backend) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING RETURNING *',
            [name, owner, JSON.stringify(backend)],
          );
          if (res.rows[0]) {
            const bucket = toBucket(res.rows[0]);
            if (hold) await tx.query('DELETE FROM bucket_name_holds WHERE name = $1', [name]);
            await tx.query('INSERT INTO bucket_stats (bucket_id) VALUES ($1) ON CONFLICT DO NOTHING', [bucket.id]);
            await insertOutboxEvent(tx, 'bucket.created', { bucket: name, bucketId: bucket.id, owner, backend: backend.kind }, new Date());
            return { bucket, created: true };
          }
          const existing = await tx.query<BucketRow>('SELECT * FROM buckets WHERE name = $1', [name]);
          if (!existing.rows[0]) throw Object.assign(new Error('bucket vanished, retry'), { code: '23505' });
          return { bucket: toBucket(existing.rows[0]), created: false };
        });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
    }
  }

  async getBucket(name: string): Promise<Bucket | undefined> {
    const res = await readQuery<BucketRow>(this.sql, 'SELECT * FROM buckets WHERE name = $1', [name]);
    return res.rows[0] && toBucket(res.rows[0]);
  }

  async listBuckets(owner: string): Promise<Bucket[]> {
    const res = await readQuery<BucketRow>(this.sql, 'SELECT * FROM buckets WHERE owner = $1 ORDER BY name', [owner]);
    return res.rows.map(toBucket);
  }

  async deleteBucket(bucket: Bucket, now: Date): Promise<{ deleted: boolean; unreferencedBlobIds: number[] }> {
    return this.sql.transaction(async (tx) => {
      await lockBucketName(tx, bucket.name);
      // Row lock: a data-plane write into this bucket holds a share lock on it, so neither can miss the other.
      const locked = await tx.query('SELECT id FROM buckets WHERE id = $1 FOR UPDATE', [bucket.id]);
      if (!locked.rows[0]) return { deleted: true, unreferencedBlobIds: [] };
      const live = await tx.query(`SELECT 1 FROM object_info WHERE bucket_id = $1 AND ${SAME_PARTITION} AND state = 'NORMAL' LIMIT 1`, [bucket.id]);
      if (live.rows.length > 0) return { deleted: false, unreferencedBlobIds: [] };
      const recycled = await tx.query<{ blob_id: number; owner: string }>(
        `UPDATE object_info SET state = 'DELETED', deleted_at = $2
         WHERE bucket_id = $1 AND ${SAME_PARTITION} AND state = 'RECYCLED' RETURNING blob_id, owner`,
        [bucket.id, now],
      );
      const unreferencedBlobIds = await releaseBlobRefs(tx, recycled.rows);
      await tx.query('DELETE FROM buckets WHERE id = $1', [bucket.id]);
      await tx.query(
        `INSERT INTO bucket_name_holds (name, owner, deleted_at) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, deleted_at = EXCLUDED.deleted_at`,
        [bucket.name, bucket.owner, now],
      );
      await tx.query('DELETE FROM bucket_stats WHERE bucket_id = $1', [bucket.id]);
      await insertOutboxEvent(tx, 'bucket.deleted', { bucket: bucket.name, bucketId: bucket.id, owner: bucket.owner }, now);
      return { deleted: true, unreferencedBlobIds };
    });
  }

  async bucketStats(bucketId: number): Promise<BucketStats> {
    const res = await readQuery<{ object_count: number; bytes: number }>(this.sql, 'SELECT object_count, bytes FROM bucket_stats WHERE bucket_id = $1', [bucketId]);
    const row = res.rows[0];
    return { objectCount: Number(row?.object_count ?? 0), bytes: Number(row?.bytes ?? 0) };
  }

  async getBucketConfig<K extends BucketConfigKind>(bucket: Bucket, kind: K): Promise<BucketConfigs[K] | undefined> {
    const res = await this.sql.query<{ config: BucketConfigs[K] | null }>(`SELECT ${CONFIG_COLUMNS[kind]} AS config FROM buckets WHERE id = $1`, [bucket.id]);
    if (!res.rows[0]) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
    return res.rows[0].config ?? undefined;
  }

  async setBucketConfig<K extends BucketConfigKind>(bucket: Bucket, kind: K, value: BucketConfigs[K] | undefined): Promise<void> {
    const res = await this.sql.query(`UPDATE buckets SET ${CONFIG_COLUMNS[kind]} = $2 WHERE id = $1`, [bucket.id, value ? JSON.stringify(value) : null]);
    if (res.rowCount === 0) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
  }

  async bucketsWithLifecycle(): Promise<Array<{ bucket: Bucket; rules: LifecycleRule[] }>> {
    const res = await this.sql.query<BucketRow & { lifecycle: LifecycleRule[] }>('SELECT * FROM buckets WHERE lifecycle IS NOT NULL ORDER BY id');
    return res.rows.map((row) => ({ bucket: toBucket(row), rules: row.lifecycle }));
  }

  async expireObjects(bucket: Bucket, selection: ExpirySelection, now: Date): Promise<string[]> {
    const expired: string[] = [];
    for (;;) {
      const batch = await retryOnConflict(() => this.sql.transaction(async (tx) => {
        // key >= prefix keeps it a range scan of the live-key index; starts_with decides. The batch is
        // picked once (ARRAY(...), see BATCH_ONCE) and then updated.
        const res = await tx.query<{ key: string; size: number; owner: string }>(
          `UPDATE object_info SET state = 'RECYCLED', recycled_at = $7
           WHERE bucket_id = $1 AND ${SAME_PARTITION} AND state = 'NORMAL' AND id = ANY (ARRAY(
             SELECT id FROM object_info
             WHERE bucket_id = $1 AND ${SAME_PARTITION} AND state = 'NORMAL' AND key >= $2 AND starts_with(key, $2)
               AND last_modified <= $3 AND ($4::bigint IS NULL OR size > $4) AND ($5::bigint IS NULL OR size < $5)
               AND ($8::jsonb IS NULL OR tags @> $8::jsonb)
             ORDER BY key LIMIT $6 FOR UPDATE SKIP LOCKED))
           RETURNING key, size, owner`,
          [bucket.id, selection.prefix, selection.createdNoLaterThan, selection.sizeGreaterThan ?? null, selection.sizeLessThan ?? null, PURGE_BATCH, now, selection.tags?.length ? JSON.stringify(selection.tags) : null],
        );
        for (const row of res.rows) {
          await insertOutboxEvent(tx, 'object.recycled', { bucket: bucket.name, bucketId: bucket.id, key: row.key, size: Number(row.size), owner: row.owner, reason: 'lifecycle' }, now);
        }
        return res.rows.map((r) => r.key);
      }));
      expired.push(...batch);
      if (batch.length < PURGE_BATCH) return expired;
    }
  }

  async headObject(bucket: Bucket, key: string): Promise<ObjectMeta | undefined> {
    const res = await readQuery<ObjectRow>(
      this.sql,
      `SELECT ${OBJECT_COLUMNS} FROM object_info WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'`,
      [bucket.id, key],
    );
    return res.rows[0] && toMeta(bucket.name, res.rows[0]);
  }

  async objectParts(bucket: Bucket, key: string): Promise<ObjectPart[] | undefined> {
    const res = await readQuery<{ part_sizes: Array<number | string> | null; part_checksums: string[] | null }>(
      this.sql,
      `SELECT part_sizes, part_checksums FROM object_info WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'`,
      [bucket.id, key],
    );
    const row = res.rows[0];
    if (!row) return undefined;
    return (row.part_sizes ?? []).map((size, i) => {
      const checksum = row.part_checksums?.[i];
      return { partNumber: i + 1, size: Number(size), ...(checksum ? { checksum } : {}) };
    });
  }

  async setObjectTags(bucket: Bucket, key: string, tags: Tag[] | undefined): Promise<boolean> {
    const res = await this.sql.query(
      `UPDATE object_info SET tags = $3 WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'`,
      [bucket.id, key, tags?.length ? JSON.stringify(tags) : null],
    );
    return res.rowCount > 0;
  }

  /**
   * S3 listing in byte order of key. Objects and common prefixes both count towards maxKeys. Each
   * common prefix is found by one index read and then skipped as a whole (one range seek), so a
   * prefix holding millions of keys costs the same as one holding a single key.
   */
  async listObjects(bucket: Bucket, q: ListQuery): Promise<ListPage> {
    const page: ListPage = { objects: [], commonPrefixes: [], isTruncated: false };
    if (q.maxKeys <= 0) return page;
    const groupOf = (key: string): string | undefined => {
      if (!q.delimiter) return undefined;
      const i = key.indexOf(q.delimiter, q.prefix.length);
      return i < 0 ? undefined : key.slice(0, i + q.delimiter.length);
    };
    // The exclusive cursor: the greatest of start-after, marker and token; a listed prefix is skipped whole.
    let cursor: string | undefined;
    const advance = (after: string, wholeGroup: boolean) => {
      const candidate = wholeGroup ? after + AFTER_ALL : after;
      if (cursor === undefined || candidate > cursor) cursor = candidate;
    };
    if (q.startAfter) advance(q.startAfter, false);
    if (q.marker) {
      const group = q.marker.startsWith(q.prefix) ? groupOf(q.marker) : undefined;
      advance(group ?? q.marker, group !== undefined);
    }
    if (q.continuationToken) {
      const t = decodeToken(q.continuationToken);
      if (!t) throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect', { ArgumentName: 'continuation-token' });
      advance(t.k, t.g);
    }
    const upper = q.prefix + AFTER_ALL;
    let count = 0;
    let last: ContinuationToken | undefined;
    for (;;) {
      const exclusive = cursor !== undefined && cursor >= q.prefix;
      const limit = Math.max(q.maxKeys - count + 1, 100);
      const res = await readQuery<ObjectRow>(
        this.sql,
        `SELECT ${OBJECT_COLUMNS} FROM object_info
         WHERE bucket_id = $1 AND ${SAME_PARTITION} AND state = 'NORMAL' AND key ${exclusive ? '>' : '>='} $2 AND key <= $3
         ORDER BY key LIMIT $4`,
        [bucket.id, exclusive ? cursor : q.prefix, upper, limit],
      );
      for (const row of res.rows) {
        const group = groupOf(row.key);
        // Further keys of the common prefix just listed add nothing.
        if (group !== undefined && last?.g && last.k === group) continue;
        if (count === q.maxKeys) {
          page.isTruncated = true;
          break;
        }
        count++;
        if (group !== undefined) {
          page.commonPrefixes.push(group);
          last = { k: group, g: true };
        } else {
          page.objects.push(toMeta(bucket.name, row));
          last = { k: row.key, g: false };
        }
      }
      if (page.isTruncated || res.rows.length < limit || !last) break;
      // Continue after the last entry; a common prefix is skipped whole with one index seek.
      advance(last.k, last.g);
    }
    if (page.isTruncated && last) {
      page.nextContinuationToken = encodeToken(last);
      page.nextMarker = last.k;
    }
    return page;
  }

  async recycleObject(bucket: Bucket, key: string, now: Date, conditions?: DeleteConditions): Promise<boolean> {
    // Unconditional: one statement, so it commits without a transaction's round trips (its WAL sync
    // then overlaps the next statements on PGlite, as a commit's does).
    if (!conditions) return recycleKey(this.sql, bucket, key, now);
    return this.sql.transaction(async (tx) => {
      // The data plane's commits of this key hold this lock (catalog.ts): none replaces the object
      // between the check and the delete. The object is read by the next statement, whose snapshot
      // comes after the lock (a commit that held it is then seen).
      await tx.query('SELECT pg_advisory_xact_lock($1::int, hashtext($2))', [bucket.id, key]);
      const row = (
        await tx.query<{ etag: string; size: number; last_modified: Date }>(
          `SELECT etag, size, last_modified FROM object_info WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'`,
          [bucket.id, key],
        )
      ).rows[0];
      checkDeleteConditions(conditions, row && { etag: row.etag, size: Number(row.size), lastModified: new Date(row.last_modified) }, key);
      return recycleKey(tx, bucket, key, now);
    });
  }

  async recycleObjects(bucket: Bucket, keys: string[], now: Date): Promise<string[]> {
    if (keys.length === 0) return [];
    return retryOnConflict(() => recycleKeys(this.sql, bucket, keys, now));
  }

  async listRecycled(q: RecycleBinQuery): Promise<RecycleBinPage> {
    const after = q.after;
    // One more than the page, to tell whether another follows. Versions of one key: newest (highest id) first.
    const res = await readQuery<{ id: number; bucket: string; key: string; size: number; recycled_at: Date }>(
      this.sql,
      `SELECT o.id, b.name AS bucket, o.key, o.size, o.recycled_at FROM object_info o JOIN buckets b ON b.id = o.bucket_id
       WHERE o.state = 'RECYCLED' AND ($1::text IS NULL OR b.owner = $1) AND ($2::text IS NULL OR b.name = $2)
         AND ($3::text IS NULL OR (o.key >= $3 AND starts_with(o.key, $3)))
         AND ($4::text IS NULL OR b.name > $4 OR (b.name = $4 AND (o.key > $5 OR (o.key = $5 AND o.id < $6))))
       ORDER BY b.name, o.key, o.id DESC LIMIT $7`,
      [q.owner ?? null, q.bucket ?? null, q.prefix || null, after?.bucket ?? null, after?.key ?? null, after?.id ?? null, q.limit + 1],
    );
    const rows = res.rows.slice(0, q.limit);
    const objects = rows.map((r) => ({ id: Number(r.id), bucket: r.bucket, key: r.key, size: Number(r.size), recycledAt: new Date(r.recycled_at).toISOString() }));
    const last = objects[objects.length - 1];
    return res.rows.length > q.limit && last ? { objects, next: { bucket: last.bucket, key: last.key, id: last.id } } : { objects };
  }

  async restoreObject(id: number, owner: string | undefined, now: Date): Promise<ObjectMeta | undefined> {
    for (;;) {
      try {
        return await this.sql.transaction(async (tx) => {
          const found = await tx.query<{ bucket_id: number; key: string; name: string; size: number; owner: string }>(
            `SELECT o.bucket_id, o.key, b.name, o.size, o.owner FROM object_info o JOIN buckets b ON b.id = o.bucket_id
             WHERE o.id = $1 AND o.state = 'RECYCLED' AND ($2::text IS NULL OR b.owner = $2) FOR UPDATE OF o`,
            [id, owner ?? null],
          );
          const target = found.rows[0];
          if (!target) return undefined;
          const bucketId = Number(target.bucket_id);
          const displaced = await tx.query<{ size: number; owner: string }>(
            `UPDATE object_info SET state = 'RECYCLED', recycled_at = $3
             WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL' RETURNING size, owner`,
            [bucketId, target.key, now],
          );
          const restored = await tx.query<ObjectRow>(
            `UPDATE object_info SET state = 'NORMAL', recycled_at = NULL
             WHERE bucket_id = $1 AND ${SAME_PARTITION} AND id = $2 RETURNING ${OBJECT_COLUMNS}`,
            [bucketId, id],
          );
          const base = { bucket: target.name, bucketId, key: target.key };
          if (displaced.rows[0]) {
            await insertOutboxEvent(tx, 'object.recycled', { ...base, size: Number(displaced.rows[0].size), owner: displaced.rows[0].owner }, now);
          }
          await insertOutboxEvent(tx, 'object.restored', { ...base, size: Number(target.size), owner: target.owner }, now);
          return toMeta(target.name, restored.rows[0]);
        });
      } catch (err) {
        // Two restores of the same key at once: the loser retries and displaces the winner.
        if (!isUniqueViolation(err)) throw err;
      }
    }
  }

  async purgeRecycled(cutoff: Date, now: Date): Promise<PurgeResult> {
    const result: PurgeResult = { purged: 0, unreferencedBlobIds: [] };
    for (;;) {
      const batch = await retryOnConflict(() => this.sql.transaction(async (tx) => {
        const res = await tx.query<{ id: number; bucket_id: number; key: string; blob_id: number; owner: string; size: number }>(
          `UPDATE object_info SET state = 'DELETED', deleted_at = $2
           WHERE state = 'RECYCLED' AND id = ANY (ARRAY(
             SELECT id FROM object_info WHERE state = 'RECYCLED' AND recycled_at < $1 ORDER BY recycled_at LIMIT ${PURGE_BATCH} FOR UPDATE SKIP LOCKED))
           RETURNING id, bucket_id, key, blob_id, owner, size`,
          [cutoff, now],
        );
        const unreferenced = await releaseBlobRefs(tx, res.rows);
        for (const row of res.rows) {
          await insertOutboxEvent(tx, 'object.purged', { bucketId: Number(row.bucket_id), key: row.key, size: Number(row.size), owner: row.owner }, now);
        }
        return { n: res.rows.length, unreferenced };
      }));
      result.purged += batch.n;
      result.unreferencedBlobIds.push(...batch.unreferenced);
      if (batch.n < PURGE_BATCH) return result;
    }
  }

  async pruneEventLogs(cutoff: Date): Promise<{ outbox: number; processed: number }> {
    const outbox = await this.sql.query('DELETE FROM outbox WHERE sent_at IS NOT NULL AND sent_at < $1', [cutoff]);
    const processed = await this.sql.query('DELETE FROM processed_events WHERE processed_at < $1', [cutoff]);
    return { outbox: outbox.rowCount, processed: processed.rowCount };
  }

  async pruneDeletedVersions(cutoff: Date): Promise<number> {
    // In batches (each its own statement and commit), so the first run over a large backlog holds no
    // long transaction. A daily scan of the table: an index on deleted_at would cost every overwrite.
    let pruned = 0;
    for (;;) {
      const res = await this.sql.query(
        `DELETE FROM object_info WHERE state = 'DELETED' AND deleted_at < $1 AND id = ANY (ARRAY(
           SELECT id FROM object_info WHERE state = 'DELETED' AND deleted_at < $1 LIMIT ${PURGE_BATCH * 20}))`,
        [cutoff],
      );
      pruned += res.rowCount;
      if (res.rowCount < PURGE_BATCH * 20) return pruned;
    }
  }

  async applyEventsOnce(events: StrataEvent[]): Promise<boolean[]> {
    // The object events of a batch in ONE statement (no BEGIN/COMMIT round trips, one commit for the
    // batch): every event id recorded (ON CONFLICT DO NOTHING keeps a redelivered one out), and each
    // bucket's counts moved once by the sum of its fresh events — a hot bucket's row is updated once
    // per batch instead of once per event. An id twice in the batch counts once. Events with other
    // side effects (bucket.deleted) are applied one by one after it.
    const applied: boolean[] = events.map(() => false);
    const seen = new Set<string>();
    const batched: number[] = [];
    const oneByOne: number[] = [];
    events.forEach((event, i) => {
      if (seen.has(event.id)) return; // a duplicate within the batch: applied at most once, below
      seen.add(event.id);
      (event.type === 'bucket.deleted' ? oneByOne : batched).push(i);
    });
    if (batched.length === 1) {
      applied[batched[0]!] = await this.applyEventOnce(events[batched[0]!]!);
    } else if (batched.length > 1) {
      const cols = { id: [] as string[], type: [] as string[], bucket: [] as Array<number | null>, objects: [] as Array<number | null>, bytes: [] as Array<number | null> };
      for (const i of batched) {
        const event = events[i]!;
        const delta = objectEventDelta(event);
        const bucketId = Number((event.payload as { bucketId?: number }).bucketId);
        cols.id.push(event.id);
        cols.type.push(event.type);
        cols.bucket.push(delta && Number.isInteger(bucketId) ? bucketId : null);
        cols.objects.push(delta ? delta.objects : null);
        cols.bytes.push(delta ? delta.bytes : null);
      }
      const res = await this.sql.query<{ event_id: string }>(
        `WITH ev AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS e(event_id, type, bucket_id, objects, bytes)),
         fresh AS (INSERT INTO processed_events (event_id, type) SELECT event_id, type FROM ev ORDER BY event_id ON CONFLICT DO NOTHING RETURNING event_id),
         delta AS (SELECT ev.bucket_id, sum(ev.objects)::bigint AS objects, sum(ev.bytes)::bigint AS bytes FROM ev JOIN fresh ON fresh.event_id = ev.event_id
           WHERE ev.bucket_id IS NOT NULL GROUP BY ev.bucket_id),
         bump AS (INSERT INTO bucket_stats (bucket_id, object_count, bytes)
           SELECT bucket_id, objects, bytes FROM delta WHERE EXISTS (SELECT 1 FROM buckets WHERE id = delta.bucket_id) ORDER BY bucket_id
           ON CONFLICT (bucket_id) DO UPDATE SET object_count = bucket_stats.object_count + EXCLUDED.object_count, bytes = bucket_stats.bytes + EXCLUDED.bytes)
         SELECT event_id FROM fresh`,
        [cols.id, cols.type, cols.bucket, cols.objects, cols.bytes],
      );
      const fresh = new Set(res.rows.map((r) => r.event_id));
      for (const i of batched) applied[i] = fresh.has(events[i]!.id);
    }
    for (const i of oneByOne) applied[i] = await this.applyEventOnce(events[i]!);
    return applied;
  }

  async applyEventOnce(event: StrataEvent): Promise<boolean> {
    // The object events (one per PUT, delete, restore) in ONE statement: the event id recorded and the
    // bucket's counts moved together, or neither (a statement is atomic; no BEGIN/COMMIT round trips).
    const delta = objectEventDelta(event);
    if (delta) {
      const bucketId = Number((event.payload as { bucketId?: number }).bucketId);
      const res = await this.sql.query(
        `WITH fresh AS (INSERT INTO processed_events (event_id, type) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING event_id),
         bump AS (INSERT INTO bucket_stats (bucket_id, object_count, bytes)
           SELECT $3::bigint, $4::bigint, $5::bigint WHERE $3::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM fresh) AND EXISTS (SELECT 1 FROM buckets WHERE id = $3::bigint)
           ON CONFLICT (bucket_id) DO UPDATE SET object_count = bucket_stats.object_count + EXCLUDED.object_count, bytes = bucket_stats.bytes + EXCLUDED.bytes)
         SELECT event_id FROM fresh`,
        [event.id, event.type, Number.isInteger(bucketId) ? bucketId : null, delta.objects, delta.bytes],
      );
      return res.rows.length > 0;
    }
    return this.sql.transaction(async (tx) => {
      const fresh = await tx.query('INSERT INTO processed_events (event_id, type) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING event_id', [event.id, event.type]);
      if (fresh.rows.length === 0) return false;
      const p = event.payload as { bucketId?: number; size?: number; replacedSize?: number | null };
      const bucketId = Number(p.bucketId);
      const bump = async (objects: number, bytes: number) => {
        if (!Number.isInteger(bucketId)) return;
        await tx.query(
          `INSERT INTO bucket_stats (bucket_id, object_count, bytes) SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM buckets WHERE id = $1)
           ON CONFLICT (bucket_id) DO UPDATE SET object_count = bucket_stats.object_count + EXCLUDED.object_count, bytes = bucket_stats.bytes + EXCLUDED.bytes`,
          [bucketId, objects, bytes],
        );
      };
      const size = Number(p.size ?? 0);
      switch (event.type) {
        case 'object.created':
          if (p.replacedSize === null || p.replacedSize === undefined) await bump(1, size);
          else await bump(0, size - Number(p.replacedSize));
          break;
        case 'object.recycled':
          await bump(-1, -size);
          break;
        case 'object.restored':
          await bump(1, size);
          break;
        case 'bucket.deleted':
          if (Number.isInteger(bucketId)) await tx.query('DELETE FROM bucket_stats WHERE bucket_id = $1', [bucketId]);
          break;
        default:
          break;
      }
      return true;
    });
  }
}

/** A conditional delete's requirements against the current object (undefined: none): NoSuchKey or PreconditionFailed as S3. */
function checkDeleteConditions(c: DeleteConditions, current: { etag: string; size: number; lastModified: Date } | undefined, key: string): void {
  if (!current) throw new S3Error('NoSuchKey', undefined, { Key: key });
  if (c.ifMatch !== undefined && !etagMatches(c.ifMatch, current.etag)) throw new S3Error('PreconditionFailed', undefined, { Condition: 'If-Match' });
  if (c.lastModifiedTime !== undefined && Math.floor(c.lastModifiedTime.getTime() / 1000) !== Math.floor(current.lastModified.getTime() / 1000)) {
    throw new S3Error('PreconditionFailed', undefined, { Condition: 'x-amz-if-match-last-modified-time' });
  }
  if (c.size !== undefined && c.size !== current.size) throw new S3Error('PreconditionFailed', undefined, { Condition: 'x-amz-if-match-size' });
}
