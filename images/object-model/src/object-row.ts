import type { ObjectMeta } from './object-layer.js';
import { splitEncryption } from './object-encryption.js';
import type { StoredHeaders } from './stored-headers.js';
import type { Tag } from './tags.js';

/**
 * An `object_info` row as both planes read it: the data plane (GET/HEAD) and the control plane
 * (listing, recycle bin) share the table, so they share its reading too.
 */
export interface ObjectRow {
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

/** The columns an ObjectRow is read from. */
export const OBJECT_COLUMNS = 'key, size, etag, md5, content_type, user_metadata, last_modified, tags, headers';

/** The object an `object_info` row of `bucket` describes (its encryption record stays out: only its public part, `sse`). */
export function objectMetaOf(bucket: string, row: ObjectRow): ObjectMeta {
  const { headers, sse } = splitEncryption(row.headers);
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
    ...(headers ? { headers } : {}),
    ...(sse ? { sse } : {}),
  };
}
