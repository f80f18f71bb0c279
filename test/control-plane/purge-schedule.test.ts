import { expect } from 'chai';
import { startControlPlane } from '../../images/control-plane/src/app.js';
import { createLogger, createPgSqlClient, type RunningService, type SqlClient } from '../../images/service-kit/src/index.js';
import { eventually } from '../data-plane/harness.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';

describe('control plane scheduled purge (node-cron)', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let sql: SqlClient;
  let cp: RunningService | undefined;

  before(async () => {
    db = await createTestDatabase();
    sql = createPgSqlClient(db.url);
  });
  after(async () => {
    await cp?.stop(1000);
    await sql?.close();
    await db?.drop();
  });

  it('runs the purge on its schedule with the injected clock', async () => {
    const now = new Date('2031-06-01T03:00:00Z');
    // Every second instead of daily at 03:00: the wiring is what is under test.
    cp = await startControlPlane({
      port: 0,
      host: '127.0.0.1',
      internalToken: 'scheduled-purge-token',
      secretKey: 'scheduled-purge-secret',
      sql,
      purgeSchedule: '* * * * * *',
      clock: () => now,
      logger: createLogger('test', 'silent'),
    });
    const bucket = await sql.query<{ id: number }>("INSERT INTO buckets (name, owner) VALUES ('cron-bucket', 'alice') RETURNING id");
    const bucketId = Number(bucket.rows[0].id);
    const blob = await sql.query<{ id: number }>(
      "INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count) VALUES ('fs', '{\"kind\":\"fs\"}', $1, 'x', 1, 2) RETURNING id",
      ['0'.repeat(32)],
    );
    const blobId = Number(blob.rows[0].id);
    await sql.query(
      `INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, owner, last_modified, recycled_at) VALUES
       ($1, 'old', 'RECYCLED', $2, 1, 'x', 'x', 'text/plain', 'alice', $3, $3),
       ($1, 'recent', 'RECYCLED', $2, 1, 'x', 'x', 'text/plain', 'alice', $4, $4)`,
      [bucketId, blobId, new Date('2031-04-01T00:00:00Z'), new Date('2031-05-20T00:00:00Z')],
    );
    await eventually(
      async () => {
        const rows = await sql.query<{ key: string; state: string }>('SELECT key, state FROM object_info WHERE bucket_id = $1 ORDER BY key', [bucketId]);
        expect(rows.rows.map((r) => [r.key, r.state])).to.deep.equal([
          ['old', 'DELETED'],
          ['recent', 'RECYCLED'],
        ]);
      },
      'the scheduled purge',
      10_000,
    );
    const refs = await sql.query<{ ref_count: number }>('SELECT ref_count FROM blobs WHERE id = $1', [blobId]);
    expect(Number(refs.rows[0].ref_count)).to.equal(1);
  });
});
