import { isUniqueViolation, readQuery, type SqlClient, type SqlExecutor } from '../../../service-kit/src/index.js';
import { S3Error, type CorsRule, type LifecycleRule, type ListBucketsQuery } from '../../../object-model/src/index.js';
import { insertOutboxEvent } from './event-inbox.js';
import { SAME_PARTITION } from './objects.js';
import { purgeBucketRecycleBin } from './recycle-bin.js';
import type { BackendConfig, Bucket, BucketConfigKind, BucketKey, BucketConfigs, BucketNameHold, BucketStats, BucketStore } from './store.js';

/** The column of each bucket configuration (names from this fixed map only: they go into SQL text). */
const CONFIG_COLUMNS: Record<BucketConfigKind, string> = {
  lifecycle: 'lifecycle',
  cors: 'cors',
  tags: 'tags',
  ownership: 'ownership',
  acl: 'acl',
  publicAccessBlock: 'public_access_block',
  encryption: 'encryption',
  logging: 'logging',
};

interface BucketRow {
  id: number;
  name: string;
  owner: string;
  backend: BackendConfig;
  created_at: Date;
  lifecycle?: LifecycleRule[] | null;
  cors?: CorsRule[] | null;
  ownership?: BucketConfigs['ownership'] | null;
  acl?: BucketConfigs['acl'] | null;
  public_access_block?: BucketConfigs['publicAccessBlock'] | null;
  encryption?: BucketConfigs['encryption'] | null;
  logging?: BucketConfigs['logging'] | null;
}

function toBucket(row: BucketRow): Bucket {
  const bucket: Bucket = { id: Number(row.id), name: row.name, owner: row.owner, backend: row.backend, createdAt: new Date(row.created_at).toISOString() };
  if (row.lifecycle) bucket.lifecycle = row.lifecycle;
  if (row.cors) bucket.cors = row.cors;
  if (row.ownership) bucket.ownership = row.ownership;
  if (row.acl) bucket.acl = row.acl;
  if (row.public_access_block) bucket.publicAccessBlock = row.public_access_block;
  if (row.encryption?.length) bucket.encryption = row.encryption;
  if (row.logging?.length) bucket.logging = row.logging;
  return bucket;
}

/** Create and delete of one bucket name take turns (the hold written by a delete is seen by a create). */
async function lockBucketName(tx: SqlExecutor, name: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtext('strata.bucket-name:' || $1))", [name]);
}

/** The buckets table, with each bucket's configurations, its counts (bucket_stats) and the holds on deleted names. */
export class SqlBucketStore implements BucketStore {
  constructor(private readonly sql: SqlClient) {}

  async create(
    name: string,
    owner: string,
    backend: BackendConfig,
    nameHold: BucketNameHold,
    configs: Pick<Partial<BucketConfigs>, 'ownership' | 'acl'> = {},
  ): Promise<{ bucket: Bucket; created: boolean }> {
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
            throw new S3Error(
              'OperationAborted',
              `The bucket name was released moments ago and cannot be taken by another account yet; try again after ${until.toISOString()}.`,
              { BucketName: name },
            );
          }
          // Its ownership controls and ACL are the bucket's from its first moment (no reader sees it without
          // them); a column not given keeps its default (the schema's BucketOwnerEnforced, no grants).
          const given = (['ownership', 'acl'] as const).filter((kind) => configs[kind] !== undefined);
          const res = await tx.query<BucketRow>(
            `INSERT INTO buckets (name, owner, backend${given.map((k) => `, ${CONFIG_COLUMNS[k]}`).join('')})
             VALUES ($1, $2, $3${given.map((_, i) => `, $${i + 4}`).join('')}) ON CONFLICT (name) DO NOTHING RETURNING *`,
            [name, owner, JSON.stringify(backend), ...given.map((k) => JSON.stringify(configs[k]))],
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

  async get(name: string): Promise<Bucket | undefined> {
    const res = await readQuery<BucketRow>(this.sql, 'SELECT * FROM buckets WHERE name = $1', [name]);
    return res.rows[0] && toBucket(res.rows[0]);
  }

  async exists(id: number): Promise<boolean> {
    return (await readQuery(this.sql, 'SELECT 1 FROM buckets WHERE id = $1', [id])).rows.length > 0;
  }

  async list(owner: string, page: ListBucketsQuery = {}): Promise<Bucket[]> {
    // Keyset on the name in byte order (COLLATE "C", as S3 sorts): a page starts after the last name of the one before.
    const res = await readQuery<BucketRow>(
      this.sql,
      `SELECT * FROM buckets WHERE owner = $1
         AND ($2::text IS NULL OR name COLLATE "C" > $2) AND starts_with(name, $3)
         AND ($4::text[] IS NULL OR name = ANY($4))
       ORDER BY name COLLATE "C" LIMIT $5`,
      [owner, page.after ?? null, page.prefix ?? '', page.names ?? null, page.limit ?? null],
    );
    return res.rows.map(toBucket);
  }

  async delete(bucket: BucketKey, now: Date): Promise<{ deleted: boolean; unreferencedBlobIds: number[] }> {
    return this.sql.transaction(async (tx) => {
      await lockBucketName(tx, bucket.name);
      // Row lock: a data-plane write into this bucket holds a share lock on it, so neither can miss the other.
      const locked = await tx.query('SELECT id FROM buckets WHERE id = $1 FOR UPDATE', [bucket.id]);
      if (!locked.rows[0]) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
      const live = await tx.query(`SELECT 1 FROM object_info WHERE bucket_id = $1 AND ${SAME_PARTITION} AND state = 'NORMAL' LIMIT 1`, [bucket.id]);
      if (live.rows.length > 0) return { deleted: false, unreferencedBlobIds: [] };
      const unreferencedBlobIds = await purgeBucketRecycleBin(tx, bucket, now);
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

  async stats(bucketId: number): Promise<BucketStats> {
    const res = await readQuery<{ object_count: number; bytes: number }>(this.sql, 'SELECT object_count, bytes FROM bucket_stats WHERE bucket_id = $1', [
      bucketId,
    ]);
    const row = res.rows[0];
    return { objectCount: Number(row?.object_count ?? 0), bytes: Number(row?.bytes ?? 0) };
  }

  async getConfig<K extends BucketConfigKind>(bucket: BucketKey, kind: K): Promise<BucketConfigs[K] | undefined> {
    const res = await this.sql.query<{ config: BucketConfigs[K] | null }>(`SELECT ${CONFIG_COLUMNS[kind]} AS config FROM buckets WHERE id = $1`, [bucket.id]);
    if (!res.rows[0]) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
    return res.rows[0].config ?? undefined;
  }

  async setConfig<K extends BucketConfigKind>(bucket: BucketKey, kind: K, value: BucketConfigs[K] | undefined): Promise<void> {
    const res = await this.sql.query(`UPDATE buckets SET ${CONFIG_COLUMNS[kind]} = $2 WHERE id = $1`, [bucket.id, value ? JSON.stringify(value) : null]);
    if (res.rowCount === 0) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
  }

  async withLifecycle(): Promise<Array<{ bucket: Bucket; rules: LifecycleRule[] }>> {
    const res = await this.sql.query<BucketRow & { lifecycle: LifecycleRule[] }>('SELECT * FROM buckets WHERE lifecycle IS NOT NULL ORDER BY id');
    return res.rows.map((row) => ({ bucket: toBucket(row), rules: row.lifecycle }));
  }
}
