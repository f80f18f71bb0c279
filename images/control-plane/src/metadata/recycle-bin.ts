import { v7 as uuidv7 } from 'uuid';
import { isUniqueViolation, readQuery, type SqlClient, type SqlExecutor } from '../../../service-kit/src/index.js';
import { checkDeleteConditions } from '../../../object-model/src/index.js';
import { insertOutboxEvent } from './event-inbox.js';
import { OBJECT_COLUMNS, objectMetaOf, SAME_PARTITION, type ObjectRow } from './objects.js';
import type { Bucket, BucketKey, DeleteConditions, ExpirySelection, ObjectMeta, PurgeResult, RecycleBin, RecycleBinPage, RecycleBinQuery } from './store.js';

/** Objects purged per transaction. */
const PURGE_BATCH = 500;
/*
 * BATCH_ONCE: a batch is chosen as `id = ANY (ARRAY(SELECT id ... LIMIT n FOR UPDATE SKIP LOCKED))`, never
 * `id IN (SELECT ...)`. ARRAY(...) runs once (an InitPlan); without planner statistics (PGlite before its
 * first VACUUM ANALYZE, or a table that grew since) the IN form may be planned as a nested loop that runs
 * the subquery again for every live row, each run skipping the rows the statement has just updated, so one
 * "batch" would update every selected row, in time quadratic in the bucket's size.
 */

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
    const res = await tx.query<{ ref_count: number }>('UPDATE blobs SET ref_count = GREATEST(ref_count - $2, 0) WHERE id = $1 RETURNING ref_count', [
      blobId,
      n,
    ]);
    if (res.rows[0] && Number(res.rows[0].ref_count) === 0) unreferenced.push(blobId);
  }
  for (const { blobId, owner, n } of perOwner.values()) {
    await tx.query('UPDATE blob_owners SET ref_count = GREATEST(ref_count - $3, 0) WHERE blob_id = $1 AND owner = $2', [blobId, owner, n]);
  }
  return unreferenced;
}

/**
 * The bucket's RECYCLED objects → DELETED inside the caller's transaction (a bucket's deletion purges
 * its recycle bin); answers the blobs nothing references any more.
 */
export async function purgeBucketRecycleBin(tx: SqlExecutor, bucket: BucketKey, now: Date): Promise<number[]> {
  const recycled = await tx.query<{ blob_id: number; owner: string }>(
    `UPDATE object_info SET state = 'DELETED', deleted_at = $2
     WHERE bucket_id = $1 AND ${SAME_PARTITION} AND state = 'RECYCLED' RETURNING blob_id, owner`,
    [bucket.id, now],
  );
  return releaseBlobRefs(tx, recycled.rows);
}

/** An object.recycled event's payload (as DeleteObject has always written it) from a recycled row `x`; $1 bucket id, $5 bucket name. */
const RECYCLED_PAYLOAD = "jsonb_build_object('bucket', $5::text, 'bucketId', $1::int, 'key', x.key, 'size', x.size, 'owner', x.owner)";

/**
 * The NORMAL object of one key → RECYCLED with its object.recycled event, in ONE statement (atomic
 * without a transaction: no BEGIN/COMMIT round trips); whether there was one. Written for one key
 * (`key = $2`) so that its plan is cached: the many-keys form is planned anew on every call, which
 * costs more than its run.
 */
async function recycleKey(sql: SqlExecutor, bucket: BucketKey, key: string, now: Date): Promise<boolean> {
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
async function recycleKeys(sql: SqlExecutor, bucket: BucketKey, keys: string[], now: Date): Promise<string[]> {
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

/** The object_info rows on their way out: recycled, restored, purged, and finally forgotten. */
export class SqlRecycleBin implements RecycleBin {
  constructor(private readonly sql: SqlClient) {}

  async recycle(bucket: BucketKey, key: string, now: Date, conditions?: DeleteConditions): Promise<boolean> {
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

  async recycleMany(bucket: BucketKey, keys: string[], now: Date): Promise<string[]> {
    if (keys.length === 0) return [];
    return retryOnConflict(() => recycleKeys(this.sql, bucket, keys, now));
  }

  async list(q: RecycleBinQuery): Promise<RecycleBinPage> {
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
    const objects = rows.map((r) => ({
      id: Number(r.id),
      bucket: r.bucket,
      key: r.key,
      size: Number(r.size),
      recycledAt: new Date(r.recycled_at).toISOString(),
    }));
    const last = objects[objects.length - 1];
    return res.rows.length > q.limit && last ? { objects, next: { bucket: last.bucket, key: last.key, id: last.id } } : { objects };
  }

  async restore(id: number, owner: string | undefined, now: Date): Promise<ObjectMeta | undefined> {
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
          return objectMetaOf(target.name, restored.rows[0]);
        });
      } catch (err) {
        // Two restores of the same key at once: the loser retries and displaces the winner.
        if (!isUniqueViolation(err)) throw err;
      }
    }
  }

  async purge(cutoff: Date, now: Date): Promise<PurgeResult> {
    const result: PurgeResult = { purged: 0, unreferencedBlobIds: [] };
    for (;;) {
      const batch = await retryOnConflict(() =>
        this.sql.transaction(async (tx) => {
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
        }),
      );
      result.purged += batch.n;
      result.unreferencedBlobIds.push(...batch.unreferenced);
      if (batch.n < PURGE_BATCH) return result;
    }
  }

  async expire(bucket: Bucket, selection: ExpirySelection, now: Date): Promise<string[]> {
    const expired: string[] = [];
    for (;;) {
      const batch = await retryOnConflict(() =>
        this.sql.transaction(async (tx) => {
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
            [
              bucket.id,
              selection.prefix,
              selection.createdNoLaterThan,
              selection.sizeGreaterThan ?? null,
              selection.sizeLessThan ?? null,
              PURGE_BATCH,
              now,
              selection.tags?.length ? JSON.stringify(selection.tags) : null,
            ],
          );
          for (const row of res.rows) {
            await insertOutboxEvent(
              tx,
              'object.recycled',
              { bucket: bucket.name, bucketId: bucket.id, key: row.key, size: Number(row.size), owner: row.owner, reason: 'lifecycle' },
              now,
            );
          }
          return res.rows.map((r) => r.key);
        }),
      );
      expired.push(...batch);
      if (batch.length < PURGE_BATCH) return expired;
    }
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
}
