import { expect } from 'chai';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { createPgliteSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';

/**
 * A batch of one takes strata_commit_one (the plain statements of one item) instead of the set-based
 * statements, and must answer and change the same as they do. Two databases take the same items: one as
 * batches of one, the other with each item beside an item of a gone bucket (which changes nothing, and
 * keeps that batch on the set-based path). Every status a commit can answer is visited.
 */
describe('strata_commit_objects: a batch of one (strata_commit_one) = the set-based path', function () {
  this.timeout(120_000);
  let single: SqlClient;
  let setBased: SqlClient;
  const GONE_BUCKET = 999;

  before(async () => {
    [single, setBased] = await Promise.all([createPgliteSqlClient(), createPgliteSqlClient()]);
    for (const db of [single, setBased]) {
      await migrate(db);
      await db.query("INSERT INTO buckets (id, name, owner) VALUES (7, 'b7', 'alice')");
      await db.query("INSERT INTO swept_locators (backend_key, locator) VALUES ('fs', 'f-swept')");
    }
  });
  after(async () => {
    await single?.close();
    await setBased?.close();
  });

  let serial = 0;
  const md5Of = (content: string) => Buffer.from(content).toString('hex').padEnd(32, '0').slice(0, 32);
  /** An item as the data plane sends it; `blob` overrides the new inline blob of `content`. */
  const item = (key: string, content: string, extra: Record<string, unknown> = {}) => ({
    bucketId: 7,
    key,
    owner: 'alice',
    backendKey: 'fs',
    backend: { kind: 'fs' },
    locator: `i${++serial}`,
    blobMd5: md5Of(content),
    blobSize: content.length,
    data: Buffer.from(content).toString('base64'),
    size: content.length,
    etag: md5Of(content),
    md5: md5Of(content),
    contentType: 'text/plain',
    userMetadata: { n: String(serial) },
    now: new Date(Date.UTC(2030, 0, 1, 0, 0, serial)).toISOString(),
    eventId: `ev-${serial}`,
    payload: { key, n: serial },
    ...extra,
  });
  /** Without bytes: a file blob. */
  const file = (key: string, content: string, extra: Record<string, unknown> = {}) => {
    const { data: _data, ...rest } = item(key, content, { locator: `f${serial + 1}`, ...extra });
    return rest;
  };
  const blobIdOf = async (db: SqlClient, content: string) =>
    (await db.query<{ id: number }>("SELECT id FROM blobs WHERE md5 = $1 AND state = 'LIVE'", [md5Of(content)])).rows[0]?.id;

  const state = async (db: SqlClient) => ({
    objects: (
      await db.query(
        `SELECT o.bucket_id, o.key, o.state, b.locator, b.md5 AS blob_md5, o.size, o.etag, o.user_metadata, o.owner, o.last_modified, o.deleted_at,
           o.tags, o.headers, o.part_sizes, o.part_checksums
         FROM object_info o LEFT JOIN blobs b ON b.id = o.blob_id ORDER BY o.key, o.last_modified`,
      )
    ).rows,
    blobs: (await db.query("SELECT locator, md5, size, ref_count, state, encode(data, 'base64') AS data FROM blobs ORDER BY locator")).rows,
    owners: (await db.query('SELECT b.locator, o.owner, o.ref_count FROM blob_owners o JOIN blobs b ON b.id = o.blob_id ORDER BY 1, 2')).rows,
    outbox: (await db.query('SELECT event_id, type, payload, created_at FROM outbox ORDER BY event_id')).rows,
  });

  /** The item committed on both (`resolve` adds what differs per database: blob ids); its status. */
  const commitBoth = async (base: Record<string, unknown>, resolve: (db: SqlClient) => Promise<Record<string, unknown>> = async () => ({})) => {
    const one = { ...base, ...(await resolve(single)) };
    const viaOne = await single.transaction(async (tx) => {
      // (The view's counts are the backend's not yet flushed ones: what this call added is the difference.)
      await tx.query("SET LOCAL track_functions = 'all'");
      const calls = async () =>
        Number(
          (await tx.query<{ calls: number }>("SELECT sum(calls) AS calls FROM pg_stat_xact_user_functions WHERE funcname = 'strata_commit_one'")).rows[0]
            ?.calls ?? 0,
        );
      const before = await calls();
      const rows = (await tx.query<Row>('SELECT * FROM strata_commit_objects($1)', [JSON.stringify([one])])).rows;
      expect((await calls()) - before, 'a batch of one went through strata_commit_one').to.equal(1);
      return rows;
    });
    const other = { ...base, ...(await resolve(setBased)) };
    const filler = { ...other, bucketId: GONE_BUCKET, key: 'filler', eventId: `filler-${String(other.eventId)}` };
    const viaSet = (await setBased.query<Row>('SELECT * FROM strata_commit_objects($1)', [JSON.stringify([other, filler])])).rows.sort(
      (a, b) => Number(a.r_index) - Number(b.r_index),
    );
    expect(viaSet[1]!.r_status).to.equal('no_bucket');
    const answer = (r: Row) => [
      Number(r.r_index),
      r.r_status,
      r.r_locator,
      r.r_replaced_size === null ? null : Number(r.r_replaced_size),
      r.r_unreferenced_blob_id !== null,
    ];
    expect(viaOne.map(answer)).to.deep.equal([answer(viaSet[0]!)]);
    expect(await state(single)).to.deep.equal(await state(setBased));
    return viaOne[0]!.r_status;
  };

  it('answers and commits as the set-based path: new, shared, replaced, freed, instant, gone, conditional, swept', async () => {
    const statuses: string[] = [];
    const both = async (...args: Parameters<typeof commitBoth>) => statuses.push(await commitBoth(...args));
    await both(item('k1', 'alpha'));
    await both(file('k2', 'beta', { tags: [{ key: 't', value: 'v' }], headers: { 'cache-control': 'no-cache' } }));
    // Content already stored: k1's new version shares k2's blob; its inline alpha goes with its bytes.
    await both(item('k1', 'beta'));
    await both(file('k2', 'gamma', { partSizes: [2, 3], partChecksums: ['AAAAAA==', 'AQEBAQ=='] }));
    // The last reference to the file blob beta goes: reported for the collector.
    await both(item('k1', 'delta'));
    // Instant upload onto a stored blob; onto one that is gone.
    await both(item('k3', 'gamma'), async (db) => ({ existingBlobId: await blobIdOf(db, 'gamma') }));
    await both({ ...item('k4', 'zeta'), existingBlobId: 424242 });
    await both({ ...item('k5', 'eta'), bucketId: GONE_BUCKET });
    // Conditional: against an older version, against the current one, for a key that has none.
    await both(item('k1', 'theta', { conditional: true, currentEtag: 'an older version' }));
    await both(item('k1', 'theta', { conditional: true, currentEtag: md5Of('delta') }));
    await both(item('k6', 'iota', { conditional: true, currentEtag: null }));
    await both(item('k7', 'iota', { conditional: true, currentEtag: md5Of('delta') }));
    // A file the orphan sweep fenced; content without an MD5.
    await both(file('k8', 'kappa', { locator: 'f-swept' }));
    await both(file('k9', 'lambda', { blobMd5: null }));
    await both(file('k9', 'lambda', { blobMd5: null }));
    expect(statuses).to.deep.equal(['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'blob_gone', 'no_bucket', 'changed', 'ok', 'ok', 'changed', 'swept', 'ok', 'ok']);
  });
});

interface Row {
  r_index: number;
  r_status: string;
  r_blob_id: number | null;
  r_locator: string | null;
  r_replaced_size: number | null;
  r_unreferenced_blob_id: number | null;
}
