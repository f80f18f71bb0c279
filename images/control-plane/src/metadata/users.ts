import { readQuery, type SqlClient } from '../../../service-kit/src/index.js';
import type { StoredUser, UserStore } from './store.js';

interface UserRow {
  username: string;
  password_hash: string;
  access_key: string;
  secret_key_enc: string;
  is_root: boolean;
  created_at: Date;
  /** Absent before migration 0009 (a query of a database not yet migrated never reaches here). */
  email?: string | null;
}

function toUser(row: UserRow): StoredUser {
  return {
    username: row.username,
    passwordHash: row.password_hash,
    accessKey: row.access_key,
    secretKeyEnc: row.secret_key_enc,
    isRoot: row.is_root,
    createdAt: new Date(row.created_at).toISOString(),
    ...(row.email ? { email: row.email } : {}),
  };
}

/** The users table. */
export class SqlUserStore implements UserStore {
  constructor(private readonly sql: SqlClient) {}

  async insert(user: Omit<StoredUser, 'createdAt' | 'isRoot'>): Promise<StoredUser> {
    const res = await this.sql.query<UserRow>(
      `INSERT INTO users (username, password_hash, access_key, secret_key_enc, email) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT DO NOTHING RETURNING *`,
      [user.username, user.passwordHash, user.accessKey, user.secretKeyEnc, user.email ?? null],
    );
    if (!res.rows[0]) throw Object.assign(new Error(`user ${user.username} exists`), { code: '23505' });
    return toUser(res.rows[0]);
  }

  async upsertRoot(user: Omit<StoredUser, 'createdAt' | 'isRoot'>): Promise<void> {
    await this.sql.query(
      `INSERT INTO users (username, password_hash, access_key, secret_key_enc, is_root) VALUES ($1, $2, $3, $4, true)
       ON CONFLICT (username) DO UPDATE SET password_hash = EXCLUDED.password_hash, access_key = EXCLUDED.access_key,
         secret_key_enc = EXCLUDED.secret_key_enc, is_root = true`,
      [user.username, user.passwordHash, user.accessKey, user.secretKeyEnc],
    );
  }

  async get(username: string): Promise<StoredUser | undefined> {
    return this.lookup('SELECT * FROM users WHERE username = $1', username);
  }

  async getByAccessKey(accessKey: string): Promise<StoredUser | undefined> {
    return this.lookup('SELECT * FROM users WHERE access_key = $1', accessKey);
  }

  /** Read on the primary: an address just given (or taken away) resolves so at once. */
  async getByEmail(email: string): Promise<StoredUser | undefined> {
    const row = (await readQuery<UserRow>(this.sql, 'SELECT * FROM users WHERE lower(email) = lower($1)', [email], { fresh: true })).rows[0];
    return row && toUser(row);
  }

  async setEmail(username: string, email: string | null): Promise<boolean> {
    const res = await this.sql.query('UPDATE users SET email = $2 WHERE username = $1', [username, email]);
    return (res.rowCount ?? 0) > 0;
  }

  /**
   * Credential lookups (login, SigV4, bearer tokens) tolerate a replica's lag, so they keep working
   * while the primary hangs or is down; a miss is confirmed on the primary, so a user created a moment
   * ago is found at once. (A changed root password may be accepted as long as the replica lags, as long
   * as the gateway's credential cache holds it.)
   */
  private async lookup(text: string, value: string): Promise<StoredUser | undefined> {
    const row =
      (await readQuery<UserRow>(this.sql, text, [value], { stale: true })).rows[0] ??
      (await readQuery<UserRow>(this.sql, text, [value], { fresh: true })).rows[0];
    return row && toUser(row);
  }
}
