import { expect } from 'chai';
import { SqlMetadataStore } from '../../images/control-plane/src/metadata/sql-store.js';
import type { Bucket } from '../../images/control-plane/src/metadata/store.js';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { createPgliteSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';

const DAY = 24 * 3600 * 1000;

/**
 * The statements that work through many objects in batches, on a database WITHOUT planner statistics
 * (the embedded PGlite before its first VACUUM ANALYZE, where no autovacuum runs): each batch must be
 * its own bounded transaction and each object must be visited once. A batch picked by `id IN (SELECT
 * ... LIMIT n FOR UPDATE SKIP LOCKED)` was planned there as a nested loop that ran the subquery again
 * for every live row: one "batch" updated every object, in time quadratic in the bucket's size.
 */
describe('control plane batch statements without planner statistics (PGlite)', function () {
  this.timeout(120_000);
  const OBJECTS = 1200;
  const BATCH = 500;
  let sql: SqlClient;
  let store: SqlMetadataStore;
  let bucket: Bucket;

  before(async () => {
    sql = await createPgliteSqlClient(undefined, { thread: false });
    await migrate(sql);
    store = new SqlMetadataStore(sql);
    ({ bucket } = await store.buckets.create('batches', 'alice', { kind: 'fs' }, { now: new Date(), ms: 0 }));
    const blob = await sql.query<{ id: number }>(
      `INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count, created_at)
       VALUES ('fs', '{"kind":"fs"}', 'blob-1', 'd41d8cd98f00b204e9800998ecf8427e', 1, $1, now()) RETURNING id`,
      [OBJECTS],
    );
    await sql.query(
      `INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, user_metadata, owner, last_modified)
       SELECT $1, 'logs/' || lpad(g::text, 6, '0'), 'NORMAL', $2, 1, 'e', 'e', 'text/plain', '{}', 'alice', now() - interval '40 days'
       FROM generate_series(1, $3) g`,
      [bucket.id, blob.rows[0].id, OBJECTS],
    );
    // What this suite is about: no ANALYZE has run, so the planner knows nothing of these rows.
    const stats = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stats WHERE tablename LIKE 'object_info%'");
    expect(stats.rows[0].n).to.equal(0);
  });
  after(async () => {
    await sql?.close();
  });

  /** How many transactions wrote the rows in `state` (rows written by one transaction share its xmin). */
  const writers = async (state: string) =>
    (await sql.query<{ n: number }>('SELECT count(DISTINCT xmin::text)::int AS n FROM object_info WHERE bucket_id = $1 AND state = $2', [bucket.id, state]))
      .rows[0].n;

  it('lifecycle expiry recycles every selected object once, in transactions of at most 500', async () => {
    const expired = await store.recycleBin.expire(bucket, { prefix: 'logs/', createdNoLaterThan: new Date() }, new Date());
    expect(expired.length).to.equal(OBJECTS);
    expect(new Set(expired).size).to.equal(OBJECTS);
    expect(await writers('RECYCLED')).to.equal(Math.ceil(OBJECTS / BATCH));
    const events = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE type = 'object.recycled'");
    expect(events.rows[0].n).to.equal(OBJECTS);
  });

  it('the recycle-bin purge deletes every recycled object once, in transactions of at most 500', async () => {
    const result = await store.recycleBin.purge(new Date(Date.now() + DAY), new Date());
    expect(result.purged).to.equal(OBJECTS);
    expect(await writers('DELETED')).to.equal(Math.ceil(OBJECTS / BATCH));
    const events = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE type = 'object.purged'");
    expect(events.rows[0].n).to.equal(OBJECTS);
  });
});
