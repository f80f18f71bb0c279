import { expect } from 'chai';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { createPgliteSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';

/**
 * A batch against its definition: the same items committed one by one, in order, each a batch of one.
 * Two databases start equal and take the same random batches; after each, the answers and the object
 * store's logical state must agree, and both sides must keep every reference-count invariant. Where the
 * orders legitimately differ (one item's replaced version releases a blob that another item of the batch
 * references: in order it may be freed and stored again, in a batch it is kept) only locators and the
 * collector's hints can differ, so those are checked by invariant, not by equality.
 */
describe('strata_commit_objects: a batch = its items one by one', function () {
  this.timeout(120_000);
  let setBased: SqlClient;
  let inOrder: SqlClient;
  const BUCKETS = [1, 2];
  const GONE_BUCKET = 999;

  before(async () => {
    [setBased, inOrder] = await Promise.all([createPgliteSqlClient(), createPgliteSqlClient()]);
    for (const db of [setBased, inOrder]) {
      await migrate(db);
      for (const id of BUCKETS) await db.query("INSERT INTO buckets (id, name, owner) VALUES ($1, $2, 'alice')", [id, `b${id}`]);
    }
  });
  after(async () => {
    await setBased?.close();
    await inOrder?.close();
  });

  /** What a client could observe, and what reference counting must agree on, without blob identities. */
  const logicalState = async (db: SqlClient) => ({
    objects: (
      await db.query(
        // A replaced version's blob may legitimately be gone in one order and kept in the other.
        `SELECT o.bucket_id, o.key, o.state, CASE WHEN o.state <> 'DELETED' THEN b.md5 END AS blob_md5, CASE WHEN o.state <> 'DELETED' THEN b.size END AS blob_size, o.size, o.etag, o.md5, o.content_type,
         o.user_metadata, o.owner, o.last_modified, o.deleted_at, o.tags, o.headers, o.part_sizes, o.part_checksums
       FROM object_info o LEFT JOIN blobs b ON b.id = o.blob_id ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13`,
      )
    ).rows,
    liveBlobs: (await db.query("SELECT md5, size, ref_count FROM blobs WHERE state = 'LIVE' AND ref_count > 0 ORDER BY md5, size")).rows,
    owners: (
      await db.query('SELECT b.md5, b.size, o.owner, o.ref_count FROM blob_owners o JOIN blobs b ON b.id = o.blob_id WHERE o.ref_count > 0 ORDER BY 1, 2, 3')
    ).rows,
    outbox: (await db.query('SELECT event_id, type, payload, created_at FROM outbox ORDER BY event_id')).rows,
  });

  /** Reference counts equal the versions that hold them; inline blobs go when their last reference does; bytes match their MD5. */
  const expectConsistent = async (db: SqlClient, round: number) => {
    const wrongCounts = await db.query(
      `SELECT b.locator, b.ref_count, (SELECT count(*) FROM object_info o WHERE o.blob_id = b.id AND o.state <> 'DELETED') AS refs
       FROM blobs b WHERE b.ref_count <> (SELECT count(*) FROM object_info o WHERE o.blob_id = b.id AND o.state <> 'DELETED')`,
    );
    expect(wrongCounts.rows, `round ${round}: blob reference counts`).to.deep.equal([]);
    const wrongOwners = await db.query(
      `SELECT x.blob_id, x.owner, x.refs, coalesce(bo.ref_count, 0) AS ref_count FROM
         (SELECT blob_id, owner, count(*)::int AS refs FROM object_info WHERE state <> 'DELETED' GROUP BY 1, 2) x
         LEFT JOIN blob_owners bo ON bo.blob_id = x.blob_id AND bo.owner = x.owner WHERE coalesce(bo.ref_count, 0) <> x.refs
       UNION ALL
       SELECT bo.blob_id, bo.owner, 0, bo.ref_count FROM blob_owners bo WHERE bo.ref_count > 0 AND NOT EXISTS
         (SELECT 1 FROM object_info o WHERE o.blob_id = bo.blob_id AND o.owner = bo.owner AND o.state <> 'DELETED')`,
    );
    expect(wrongOwners.rows, `round ${round}: owner reference counts`).to.deep.equal([]);
    const leftInline = await db.query('SELECT locator FROM blobs WHERE data IS NOT NULL AND ref_count = 0');
    expect(leftInline.rows, `round ${round}: unreferenced inline blobs`).to.deep.equal([]);
    const badBytes = await db.query("SELECT locator FROM blobs WHERE data IS NOT NULL AND rpad(encode(data, 'hex'), 32, '0') <> md5");
    expect(badBytes.rows, `round ${round}: inline bytes`).to.deep.equal([]);
    const twoLive = await db.query("SELECT bucket_id, key FROM object_info WHERE state = 'NORMAL' GROUP BY 1, 2 HAVING count(*) > 1");
    expect(twoLive.rows, `round ${round}: one live version per key`).to.deep.equal([]);
  };

  it('frees an inline blob that every one of its versions in the batch releases, and only counts down one that more hold', async () => {
    const db = await createPgliteSqlClient();
    try {
      await migrate(db);
      await db.query("INSERT INTO buckets (id, name, owner) VALUES (7, 'b7', 'alice')");
      const item = (key: string, content: string, locator: string, eventId: string) => ({
        bucketId: 7,
        key,
        owner: 'alice',
        backendKey: 'fs',
        backend: { kind: 'fs' },
        locator,
        blobMd5: content.padEnd(32, '0'),
        blobSize: content.length,
        data: Buffer.from(content).toString('base64'),
        size: content.length,
        etag: 'e',
        md5: content.padEnd(32, '0'),
        contentType: 'text/plain',
        userMetadata: {},
        now: '2030-02-01T00:00:00Z',
        eventId,
        payload: {},
      });
      const commit = async (items: unknown[]) =>
        (await db.query<{ r_status: string }>('SELECT * FROM strata_commit_objects($1)', [JSON.stringify(items)])).rows;
      // Three versions share one inline blob; two of them are replaced in one batch, then the third.
      await commit([item('s1', 'shared', 'i-shared-1', 'sh-1'), item('s2', 'shared', 'i-shared-2', 'sh-2'), item('s3', 'shared', 'i-shared-3', 'sh-3')]);
      const refs = async () => (await db.query<{ ref_count: number }>("SELECT ref_count FROM blobs WHERE locator = 'i-shared-1'")).rows.map((r) => r.ref_count);
      expect(await refs()).to.deep.equal([3]);
      expect((await commit([item('s1', 'other1', 'i-o1', 'sh-4'), item('s2', 'other2', 'i-o2', 'sh-5')])).map((r) => r.r_status)).to.deep.equal(['ok', 'ok']);
      expect(await refs()).to.deep.equal([1]);
      // The last two holders go in one batch: the row goes, with its owner rows.
      await commit([item('s3', 'other3', 'i-o3', 'sh-6'), item('s4', 'other4', 'i-o4', 'sh-7')]);
      expect(await refs()).to.deep.equal([]);
      await commit([item('s5', 'shared', 'i-shared-5', 'sh-8'), item('s6', 'shared', 'i-shared-6', 'sh-9')]);
      await commit([item('s5', 'x5', 'i-x5', 'sh-10'), item('s6', 'x6', 'i-x6', 'sh-11')]);
      expect((await db.query('SELECT 1 FROM blobs WHERE md5 = $1', ['shared'.padEnd(32, '0')])).rows, 'both holders replaced at once').to.deep.equal([]);
      expect((await db.query('SELECT 1 FROM blob_owners bo WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = bo.blob_id)')).rows).to.deep.equal([]);
      // Each key's advisory lock is held to the end of the transaction, as one by one (on PostgreSQL a
      // writer of the same key outside the batch waits for it).
      const held = await db.transaction(async (tx) => {
        await tx.query('SELECT * FROM strata_commit_objects($1)', [
          JSON.stringify([item('l1', 'a', 'i-l1', 'l-1'), item('l2', 'b', 'i-l2', 'l-2'), item('l3', 'c', 'i-l3', 'l-3')]),
        ]);
        return (await tx.query<{ objid: number }>("SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = 7 ORDER BY objid")).rows.map((r) =>
          Number(r.objid),
        );
      });
      const expected = await db.query<{ h: number }>("SELECT hashtext(k)::oid::bigint AS h FROM unnest(ARRAY['l1', 'l2', 'l3']) AS k ORDER BY 1");
      expect(held).to.deep.equal(expected.rows.map((r) => Number(r.h)));
    } finally {
      await db.close();
    }
  });

  it('agrees on random batches: shared and repeated content, inline and file blobs, overwrites, instant hits, gone blobs and buckets, one key twice', async () => {
    let seed = 20261126;
    const random = () => {
      // mulberry32
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const contents = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa'];
    const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
    let serial = 0;
    let setBasedRuns = 0;
    let instantHits = 0;
    const reported = new Set<string>();
    const statuses: string[] = [];
    for (let round = 0; round < 60; round++) {
      const size = 1 + Math.floor(random() * 10);
      const repeatKey = random() < 0.15;
      const used = new Set<string>();
      const now = new Date(Date.UTC(2030, 0, 1, 0, 0, round)).toISOString();
      // Items as the data plane sends them; an existing blob is chosen by content (ids differ per database).
      const items: Array<Record<string, unknown>> = [];
      for (let n = 0; n < size; n++) {
        let key = pick(keys);
        if (!repeatKey) while (used.has(key)) key = pick(keys);
        used.add(key);
        const content = pick(contents);
        const md5 = Buffer.from(content).toString('hex').padEnd(32, '0').slice(0, 32);
        const bucketId = random() < 0.05 ? GONE_BUCKET : pick(BUCKETS);
        const inline = random() < 0.6;
        const blob =
          random() < 0.25
            ? { existing: random() < 0.2 ? 'none' : md5 }
            : {
                backendKey: 'fs',
                backend: { kind: 'fs' },
                locator: `${inline ? 'i' : 'f'}${String(++serial).padStart(5, '0')}`,
                blobMd5: md5,
                blobSize: content.length,
                ...(inline ? { data: Buffer.from(content).toString('base64') } : {}),
              };
        items.push({
          bucketId,
          key,
          owner: pick(['alice', 'bob']),
          ...blob,
          size: content.length,
          etag: md5,
          md5,
          contentType: 'text/plain',
          userMetadata: { round: String(round) },
          ...(random() < 0.3
            ? {
                tags: [
                  { key: 'round', value: String(round) },
                  { key: 'n', value: String(n) },
                ],
              }
            : {}),
          // (Not drawn from `random`: the sequences of earlier rounds stay as they were.)
          ...(n % 4 === 0 ? { headers: { 'cache-control': `max-age=${n}`, 'x-amz-checksum-crc32': 'AAAAAA==', 'x-amz-checksum-type': 'FULL_OBJECT' } } : {}),
          ...(n % 5 === 3 ? { partSizes: [1, content.length - 1], partChecksums: ['AAAAAA==', 'AQEBAQ=='] } : {}),
          ...((round + n) % 7 === 2 ? { conditional: true } : (round + n) % 11 === 5 ? { conditional: true, currentEtag: 'an older version' } : {}),
          now,
          eventId: `ev-${String(round).padStart(2, '0')}-${n}`,
          payload: { bucketId, key, size: content.length },
        });
      }
      // Every fifth new content has no MD5 (as a multipart completion's): no content identity.
      for (const [n, item] of items.entries()) if (n % 5 === 1 && 'blobMd5' in item) item.blobMd5 = null;
      // An instant hit names a LIVE blob holding more references than the batch's overwrites release (so
      // that both orders find it); otherwise a blob id that does not exist. A conditional item expects an
      // older version, or the key's version from before the batch (so it fails where an earlier item of
      // the batch wrote the key).
      const resolve = async (db: SqlClient) =>
        Promise.all(
          items.map(async ({ existing, ...item }) => {
            if (item.conditional && !('currentEtag' in item)) {
              const current = await db.query<{ etag: string }>("SELECT etag FROM object_info WHERE bucket_id = $1 AND key = $2 AND state = 'NORMAL'", [
                item.bucketId,
                item.key,
              ]);
              item.currentEtag = current.rows[0]?.etag ?? null;
            }
            if (existing === undefined) return item;
            const row = (
              await db.query<{ id: number }>(
                `SELECT b.id FROM blobs b WHERE b.md5 = $1 AND b.state = 'LIVE' AND b.ref_count > (SELECT count(*) FROM object_info o
               WHERE o.blob_id = b.id AND o.state = 'NORMAL' AND (o.bucket_id, o.key) IN (SELECT * FROM unnest($2::int[], $3::text[])))`,
                [existing, items.map((i) => i.bucketId), items.map((i) => i.key)],
              )
            ).rows[0];
            return { ...item, existingBlobId: row?.id ?? 424242 };
          }),
        );
      const [aItems, bItems] = [await resolve(setBased), await resolve(inOrder)];
      const a = (
        await setBased.query<{
          r_index: number;
          r_status: string;
          r_blob_id: number | null;
          r_locator: string | null;
          r_replaced_size: number | null;
          r_unreferenced_blob_id: number | null;
        }>('SELECT * FROM strata_commit_objects($1)', [JSON.stringify(aItems)])
      ).rows.sort((x, y) => Number(x.r_index) - Number(y.r_index));
      const b: Array<{ r_index: number; r_status: string; r_replaced_size: number | null }> = [];
      for (const [i, item] of bItems.entries()) {
        const [row] = (
          await inOrder.query<{ r_status: string; r_replaced_size: number | null }>('SELECT * FROM strata_commit_objects($1)', [JSON.stringify([item])])
        ).rows;
        b.push({ ...row!, r_index: i + 1 });
      }
      statuses.push(...a.map((r) => r.r_status));
      const outcome = (rows: Array<{ r_index: number; r_status: string; r_replaced_size: number | null }>) =>
        rows.map((r) => [Number(r.r_index), r.r_status, r.r_replaced_size === null ? null : Number(r.r_replaced_size)]);
      expect(outcome(a), `round ${round}: statuses and replaced sizes`).to.deep.equal(outcome(b));
      expect(await logicalState(setBased), `round ${round}: state`).to.deep.equal(await logicalState(inOrder));
      await expectConsistent(setBased, round);
      await expectConsistent(inOrder, round);
      // Each committed item's blob holds its content; a new blob that was kept carries the item's locator.
      // (Not for a version that a later item of the batch replaced: its inline blob may be freed already.)
      for (const [i, row] of a.entries()) {
        const item = aItems[i]!;
        if (row.r_status !== 'ok' || aItems.slice(i + 1).some((later) => later.bucketId === item.bucketId && later.key === item.key)) continue;
        const blob = (await setBased.query<{ md5: string | null; locator: string }>('SELECT md5, locator FROM blobs WHERE id = $1', [row.r_blob_id])).rows[0];
        expect(blob?.md5, `round ${round} item ${i + 1}: blob content`).to.equal('blobMd5' in item ? item.blobMd5 : item.md5);
        if ('existingBlobId' in item) instantHits++;
        else expect(row.r_locator, `round ${round} item ${i + 1}: locator`).to.equal(blob!.locator);
      }
      // Blobs a set-based batch reports unreferenced are unreferenced after it (in order, a later item may
      // take the blob again; the collector checks the count before freeing).
      for (const row of repeatKey ? [] : a.filter((r) => r.r_unreferenced_blob_id !== null)) {
        const refs = (await setBased.query<{ ref_count: number }>('SELECT ref_count FROM blobs WHERE id = $1', [row.r_unreferenced_blob_id])).rows[0];
        expect(refs?.ref_count, `round ${round}: reported blob`).to.equal(0);
        reported.add(String(row.r_unreferenced_blob_id));
      }
      if (!repeatKey) setBasedRuns++;
    }
    // The rounds must have reached every branch, or the comparison proves little.
    const { objects } = await logicalState(setBased);
    expect(setBasedRuns, 'batches without a repeated key').to.be.greaterThan(40);
    expect(statuses.filter((s) => s === 'changed').length, 'conditional items refused').to.be.greaterThan(0);
    const reached = (
      await setBased.query<{ unhashed: number; parts: number }>(
        `SELECT (SELECT count(*)::int FROM blobs WHERE md5 IS NULL) AS unhashed, (SELECT count(*)::int FROM object_info WHERE part_sizes IS NOT NULL) AS parts`,
      )
    ).rows[0]!;
    expect(reached.unhashed, 'blobs without an MD5').to.be.greaterThan(5);
    expect(reached.parts, 'versions with part sizes').to.be.greaterThan(5);
    expect(instantHits, 'instant hits').to.be.greaterThan(5);
    expect(objects.filter((o) => o.state === 'DELETED').length, 'overwrites').to.be.greaterThan(50);
    expect(reported.size, 'file blobs left for the collector').to.be.greaterThan(0);
    const shared = await setBased.query('SELECT 1 FROM blobs WHERE ref_count > 2 AND data IS NOT NULL');
    expect(shared.rows.length, 'shared inline blobs').to.be.greaterThan(0);
    const events = (await setBased.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox')).rows[0]!.n;
    expect(events, 'events').to.be.greaterThan(150);
  });
});
