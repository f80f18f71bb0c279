import { readQuery, type SqlClient } from '../../../service-kit/src/index.js';
import { OBJECT_ACL_HEADER, objectMetaOf, OBJECT_COLUMNS, S3Error, type ObjectRow, type Tag } from '../../../object-model/src/index.js';

export { OBJECT_COLUMNS, objectMetaOf, type ObjectRow } from '../../../object-model/src/index.js';
import type { BucketKey, ListPage, ListQuery, ObjectMeta, ObjectPart, ObjectStore } from './store.js';

/**
 * Appended to a prefix, this string sorts after every key that starts with the prefix: keys are at
 * most 1024 bytes, and U+10FFFF (F4 8F BF BF) is the greatest UTF-8 sequence, so 257 of them are
 * greater than any possible rest of a key. Keeps "skip this common prefix" an index range scan.
 */
const AFTER_ALL = '\u{10FFFF}'.repeat(257);

/** Partition pruning: the planner can only skip the other partition when the partition expression appears. */
export const SAME_PARTITION = '(bucket_id % 2) = ($1::int % 2)';

interface ContinuationToken {
  /** The last key or common prefix returned. */
  k: string;
  /** True when `k` is a common prefix (everything under it was listed). */
  g: boolean;
}

function encodeToken(t: ContinuationToken): string {
  return Buffer.from(JSON.stringify(t), 'utf8').toString('base64url');
}

function decodeToken(token: string): ContinuationToken | undefined {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as ContinuationToken;
    return typeof t.k === 'string' && typeof t.g === 'boolean' ? t : undefined;
  } catch {
    return undefined;
  }
}

/** The NORMAL rows of object_info. */
export class SqlObjectStore implements ObjectStore {
  constructor(private readonly sql: SqlClient) {}

  async head(bucket: BucketKey, key: string): Promise<ObjectMeta | undefined> {
    const res = await readQuery<ObjectRow>(
      this.sql,
      `SELECT ${OBJECT_COLUMNS} FROM object_info WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'`,
      [bucket.id, key],
    );
    return res.rows[0] && objectMetaOf(bucket.name, res.rows[0]);
  }

  async parts(bucket: BucketKey, key: string): Promise<ObjectPart[] | undefined> {
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

  async setTags(bucket: BucketKey, key: string, tags: Tag[] | undefined): Promise<boolean> {
    const res = await this.sql.query(`UPDATE object_info SET tags = $3 WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'`, [
      bucket.id,
      key,
      tags?.length ? JSON.stringify(tags) : null,
    ]);
    return res.rowCount > 0;
  }

  /** Keep `acl` (aclHeaders' value) among the object's stored headers, or remove it (undefined). */
  async setAcl(bucket: BucketKey, key: string, acl: string | undefined): Promise<boolean> {
    const res = await this.sql.query(
      `UPDATE object_info SET headers = NULLIF(CASE WHEN $3::text IS NULL THEN COALESCE(headers, '{}'::jsonb) - $4::text
                                                    ELSE COALESCE(headers, '{}'::jsonb) || jsonb_build_object($4::text, $3::text) END, '{}'::jsonb)
       WHERE bucket_id = $1 AND ${SAME_PARTITION} AND key = $2 AND state = 'NORMAL'`,
      [bucket.id, key, acl ?? null, OBJECT_ACL_HEADER],
    );
    return res.rowCount > 0;
  }

  /**
   * S3 listing in byte order of key. Objects and common prefixes both count towards maxKeys. Each
   * common prefix is found by one index read and then skipped as a whole (one range seek), so a
   * prefix holding millions of keys costs the same as one holding a single key.
   */
  async list(bucket: BucketKey, q: ListQuery): Promise<ListPage> {
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
          page.objects.push(objectMetaOf(bucket.name, row));
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
}
