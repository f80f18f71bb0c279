import type { SqlClient } from '../../../service-kit/src/index.js';
import { SqlBucketStore } from './buckets.js';
import { SqlEventInbox } from './event-inbox.js';
import { SqlObjectStore } from './objects.js';
import { SqlRecycleBin } from './recycle-bin.js';
import { SqlScopedKeyStore } from './scoped-keys.js';
import type { MetadataStore } from './store.js';
import { SqlUserStore } from './users.js';

/** The metadata store on SQL; the same statements run on PostgreSQL and PGlite. */
export class SqlMetadataStore implements MetadataStore {
  readonly users: SqlUserStore;
  readonly scopedKeys: SqlScopedKeyStore;
  readonly buckets: SqlBucketStore;
  readonly objects: SqlObjectStore;
  readonly recycleBin: SqlRecycleBin;
  readonly inbox: SqlEventInbox;

  constructor(private readonly sql: SqlClient) {
    this.users = new SqlUserStore(sql);
    this.scopedKeys = new SqlScopedKeyStore(sql);
    this.buckets = new SqlBucketStore(sql);
    this.objects = new SqlObjectStore(sql);
    this.recycleBin = new SqlRecycleBin(sql);
    this.inbox = new SqlEventInbox(sql);
  }

  async ping(): Promise<void> {
    await this.sql.query('SELECT 1 FROM schema_migrations LIMIT 1');
  }
}
