import { readQuery, type SqlClient } from '../../../service-kit/src/index.js';
import { isKeyScope, type KeyScope } from '../../../object-model/src/index.js';
import type { ScopedKeyStore, StoredScopedKey } from './store.js';

interface ScopedKeyRow {
  access_key: string;
  name: string | null;
  parent: string;
  secret_key_enc: string;
  scope: unknown;
  created_at: Date;
}

function toKey(row: ScopedKeyRow): StoredScopedKey {
  const scope = typeof row.scope === 'string' ? (JSON.parse(row.scope) as unknown) : row.scope;
  // A row that is not a scope grants nothing rather than everything.
  if (!isKeyScope(scope)) throw new Error(`scoped key ${row.access_key} has no valid scope`);
  return {
    accessKey: row.access_key,
    ...(row.name !== null ? { name: row.name } : {}),
    parent: row.parent,
    secretKeyEnc: row.secret_key_enc,
    scope,
    createdAt: new Date(row.created_at).toISOString(),
  };
}

/** The scoped_keys table. */
export class SqlScopedKeyStore implements ScopedKeyStore {
  constructor(private readonly sql: SqlClient) {}

  async insert(key: Omit<StoredScopedKey, 'createdAt'>): Promise<StoredScopedKey> {
    const res = await this.sql.query<ScopedKeyRow>(
      `INSERT INTO scoped_keys (access_key, name, parent, secret_key_enc, scope) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT DO NOTHING RETURNING *`,
      [key.accessKey, key.name ?? null, key.parent, key.secretKeyEnc, JSON.stringify(key.scope)],
    );
    if (!res.rows[0]) throw Object.assign(new Error(`scoped key ${key.name ?? key.accessKey} exists`), { code: '23505' });
    return toKey(res.rows[0]);
  }

  /** As user lookups: a replica's lag is tolerated, a miss is confirmed on the primary. */
  async getByAccessKey(accessKey: string): Promise<StoredScopedKey | undefined> {
    return this.lookup('SELECT * FROM scoped_keys WHERE access_key = $1', accessKey);
  }

  async getByName(name: string): Promise<StoredScopedKey | undefined> {
    const res = await readQuery<ScopedKeyRow>(this.sql, 'SELECT * FROM scoped_keys WHERE name = $1', [name], { fresh: true });
    return res.rows[0] && toKey(res.rows[0]);
  }

  async list(parent: string): Promise<StoredScopedKey[]> {
    const res = await readQuery<ScopedKeyRow>(this.sql, 'SELECT * FROM scoped_keys WHERE parent = $1 ORDER BY created_at, access_key', [parent], {
      fresh: true,
    });
    return res.rows.map(toKey);
  }

  async setScope(accessKey: string, scope: KeyScope): Promise<void> {
    await this.sql.query('UPDATE scoped_keys SET scope = $2 WHERE access_key = $1', [accessKey, JSON.stringify(scope)]);
  }

  async delete(accessKey: string): Promise<boolean> {
    const res = await this.sql.query('DELETE FROM scoped_keys WHERE access_key = $1', [accessKey]);
    return (res.rowCount ?? 0) > 0;
  }

  private async lookup(text: string, value: string): Promise<StoredScopedKey | undefined> {
    const row =
      (await readQuery<ScopedKeyRow>(this.sql, text, [value], { stale: true })).rows[0] ??
      (await readQuery<ScopedKeyRow>(this.sql, text, [value], { fresh: true })).rows[0];
    return row && toKey(row);
  }
}
