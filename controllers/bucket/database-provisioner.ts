import { createHash } from 'node:crypto';
import pg from 'pg';
import type { StackIdentity } from './stack-identity.js';

/**
 * Makes a namespace's own role and database exist on a shared PostgreSQL server, so that the
 * namespace's services log in as that role and reach only that database.
 */
export interface DatabaseProvisioner {
  ensure(identity: StackIdentity, password: string): Promise<void>;
  close(): Promise<void>;
}

/** SQLSTATEs of "already exists": another reconcile of the same namespace created it first. */
const ALREADY_EXISTS = new Set(['42710', '42P04']);

/**
 * On the server the administrator's URL names (a role with CREATEROLE and CREATEDB, or a superuser):
 * the role with this password, a database it owns, and no CONNECT for anyone else. Idempotent.
 */
export class PgDatabaseProvisioner implements DatabaseProvisioner {
  private readonly pool: pg.Pool;
  /**
   * Per role, a digest of the password this process last set. ALTER ROLE … PASSWORD runs only when it
   * differs (first reconcile after a start, or a new password), not on every reconcile: each one
   * rewrites the catalog and its verifier (a new SCRAM salt) and may be logged by the server.
   */
  private readonly passwordSet = new Map<string, string>();

  constructor(adminUrl: string) {
    this.pool = new pg.Pool({ connectionString: adminUrl, max: 2, connectionTimeoutMillis: 10_000, query_timeout: 30_000 });
  }

  async ensure(identity: StackIdentity, password: string): Promise<void> {
    const client = await this.pool.connect();
    try {
      const role = client.escapeIdentifier(identity.role);
      const database = client.escapeIdentifier(identity.database);
      const secret = client.escapeLiteral(password);
      const roleExists = (await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [identity.role])).rowCount;
      const digest = createHash('sha256').update(password).digest('hex');
      if (!roleExists || this.passwordSet.get(identity.role) !== digest) {
        await tolerateExisting(client.query(roleExists ? `ALTER ROLE ${role} LOGIN PASSWORD ${secret}` : `CREATE ROLE ${role} LOGIN PASSWORD ${secret}`));
        this.passwordSet.set(identity.role, digest);
      }
      // A non-superuser administrator can only hand a database to a role it is a member of.
      await client.query(`GRANT ${role} TO CURRENT_USER`).catch(() => undefined);
      const dbExists = (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [identity.database])).rowCount;
      if (!dbExists) await tolerateExisting(client.query(`CREATE DATABASE ${database} OWNER ${role}`));
      await client.query(`REVOKE ALL ON DATABASE ${database} FROM PUBLIC`);
      await client.query(`GRANT ALL ON DATABASE ${database} TO ${role}`);
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

async function tolerateExisting(query: Promise<unknown>): Promise<void> {
  try {
    await query;
  } catch (err) {
    if (!ALREADY_EXISTS.has((err as { code?: string }).code ?? '')) throw err;
  }
}
