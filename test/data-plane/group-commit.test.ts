import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { Catalog, type BucketRef, type CommitRequest } from '../../images/data-plane/src/catalog/catalog.js';
import { GroupCommit } from '../../images/data-plane/src/catalog/group-commit.js';
import { createPgliteSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';
import { S3Error } from '../../images/object-model/src/index.js';

describe('group commit', function () {
  this.timeout(60_000);

  describe('GroupCommit', () => {
    it('gathers the items of one event-loop turn into a batch, and those submitted while it runs into the next', async () => {
      const batches: number[][] = [];
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const group = new GroupCommit<number, number>(
        async (items) => {
          batches.push(items);
          if (batches.length === 1) await gate;
          return items.map((value) => ({ status: 'fulfilled', value: value * 10 }));
        },
        { maxBatch: 3 },
      );
      const first = [group.submit(1), group.submit(2)];
      expect(batches, 'nothing runs before the turn ends').to.deep.equal([]);
      await new Promise((resolve) => setImmediate(resolve));
      expect(batches).to.deep.equal([[1, 2]]);
      const later = [3, 4, 5, 6].map((n) => group.submit(n));
      release();
      expect(await Promise.all([...first, ...later])).to.deep.equal([10, 20, 30, 40, 50, 60]);
      expect(batches).to.deep.equal([[1, 2], [3, 4, 5], [6]]);
    });

    it('with maxInFlight 2, hands over the next batch while the one before has not answered, and no third', async () => {
      const batches: number[][] = [];
      const gates: Array<() => void> = [];
      const group = new GroupCommit<number, number>(
        async (items) => {
          batches.push(items);
          await new Promise<void>((resolve) => gates.push(resolve));
          return items.map((value) => ({ status: 'fulfilled', value: value * 10 }));
        },
        { maxInFlight: 2 },
      );
      const turn = () => new Promise((resolve) => setImmediate(resolve));
      const first = [group.submit(1), group.submit(2)];
      await turn();
      const second = [group.submit(3), group.submit(4)];
      await turn();
      expect(batches, 'the second runs while the first waits').to.deep.equal([
        [1, 2],
        [3, 4],
      ]);
      const third = [group.submit(5), group.submit(6)];
      await turn();
      expect(batches, 'no third batch while two run').to.have.length(2);
      gates[1]!();
      expect(await Promise.all(second), 'a later batch may answer first').to.deep.equal([30, 40]);
      await turn();
      expect(batches).to.deep.equal([
        [1, 2],
        [3, 4],
        [5, 6],
      ]);
      gates[0]!();
      gates[2]!();
      expect(await Promise.all([...first, ...third])).to.deep.equal([10, 20, 50, 60]);
    });

    it("settles each item on its own, and a failed run fails only that run's items", async () => {
      let calls = 0;
      const group = new GroupCommit<number, number>(async (items) => {
        calls++;
        if (items.includes(13)) throw new Error('whole batch failed');
        return items.map(
          (value): PromiseSettledResult<number> => (value % 2 ? { status: 'fulfilled', value } : { status: 'rejected', reason: new Error(`even ${value}`) }),
        );
      });
      const results = await Promise.allSettled([group.submit(1), group.submit(2), group.submit(3)]);
      expect(results.map((r) => r.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
      expect(((results[1] as PromiseRejectedResult).reason as Error).message).to.equal('even 2');
      const failed = await group.submit(13).catch((err: Error) => err);
      expect(failed).to.be.instanceOf(Error).with.property('message', 'whole batch failed');
      expect(await group.submit(5)).to.equal(5);
      expect(calls, 'one batch each: [1, 2, 3], [13], [5]').to.equal(3);
    });
  });

  describe('Catalog on PGlite', () => {
    let sql: SqlClient;
    let statements: string[];
    let bucket: BucketRef;
    let seq = 0;

    before(async () => {
      const inner = await createPgliteSqlClient();
      await migrate(inner);
      statements = [];
      // Records the statements the catalog sends, to see the batches.
      sql = { ...inner, query: (text, params) => (statements.push(text), inner.query(text, params)) };
      const row = (await sql.query<{ id: number }>("INSERT INTO buckets (name, owner, backend) VALUES ('gc', 'alice', '{\"kind\":\"fs\"}') RETURNING id"))
        .rows[0]!;
      bucket = { id: Number(row.id), name: 'gc', owner: 'alice', backend: { kind: 'fs' } };
    });
    after(async () => {
      await sql?.close();
    });

    const commitOf = (key: string, content: string, over: Partial<CommitRequest> = {}): CommitRequest => ({
      bucket,
      key,
      owner: 'alice',
      blob: { kind: 'new', backendKey: 'fs', backend: { kind: 'fs' }, locator: `loc-${++seq}`, md5: content.padEnd(32, '0'), size: content.length },
      etag: content.padEnd(32, '0'),
      md5: content.padEnd(32, '0'),
      size: content.length,
      contentType: 'text/plain',
      userMetadata: { n: String(seq) },
      now: new Date('2030-01-01T00:00:00.123Z'),
      ...over,
    });
    const live = async (key: string) =>
      (
        await sql.query<{ etag: string; blob_id: number }>("SELECT etag, blob_id FROM object_info WHERE bucket_id = $1 AND key = $2 AND state = 'NORMAL'", [
          bucket.id,
          key,
        ])
      ).rows;
    const events = async (key: string) =>
      Number((await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE payload->>'key' = $1", [key])).rows[0]!.n);

    it('commits concurrent writes in batches with the same outcome as one by one', async () => {
      const catalog = new Catalog(sql);
      statements.length = 0;
      const reqs = Array.from({ length: 20 }, (_, i) =>
        commitOf(i < 10 ? `key-${i}` : 'contended', `c${i % 4}`, {
          ...(i % 3 === 0 ? { tags: [{ key: 'i', value: String(i) }] } : {}),
          ...(i % 2 === 0 ? { headers: { 'content-language': `l${i}` } } : {}),
        }),
      );
      const results = await Promise.all(reqs.map((r) => catalog.commitObject(r)));
      const batched = statements.filter((s) => s.includes('strata_commit_objects'));
      expect(batched.length, 'batch statements').to.be.greaterThan(0);
      expect(statements.length, 'statements for 20 commits').to.be.lessThan(20);
      results.forEach((r, i) => {
        expect(r.meta).to.include({ bucket: 'gc', key: reqs[i]!.key, etag: reqs[i]!.etag, lastModified: '2030-01-01T00:00:00.123Z' });
        expect(r.meta.userMetadata).to.deep.equal(reqs[i]!.userMetadata);
        expect(r.meta.tags).to.deep.equal(reqs[i]!.tags);
        expect(r.meta.headers).to.deep.equal(reqs[i]!.headers);
      });
      // Tags and headers are stored with each version (every third request brought tags, every second headers).
      for (let i = 0; i < 10; i++) {
        const row = (
          await sql.query<{ tags: unknown; headers: unknown }>("SELECT tags, headers FROM object_info WHERE bucket_id = $1 AND key = $2 AND state = 'NORMAL'", [
            bucket.id,
            `key-${i}`,
          ])
        ).rows[0]!;
        expect(row.tags, `key-${i}`).to.deep.equal(i % 3 === 0 ? [{ key: 'i', value: String(i) }] : null);
        expect(row.headers, `key-${i}`).to.deep.equal(i % 2 === 0 ? { 'content-language': `l${i}` } : null);
      }
      // Same content → one blob: only the first writer of each content keeps its new blob.
      expect(results.filter((r) => r.newBlobKept)).to.have.length(4);
      for (let i = 0; i < 10; i++) expect(await live(`key-${i}`)).to.have.length(1);
      const contended = await live('contended');
      expect(contended).to.have.length(1);
      expect(contended[0]!.etag).to.equal(reqs[19]!.etag);
      expect(await events('contended')).to.equal(10);
      const row = (
        await sql.query<{ payload: Record<string, unknown>; created_at: Date }>("SELECT payload, created_at FROM outbox WHERE payload->>'key' = 'key-3'")
      ).rows[0]!;
      expect(row.payload).to.include({ bucket: 'gc', bucketId: bucket.id, key: 'key-3', size: 2, owner: 'alice', contentType: 'text/plain' });
      expect(new Date(row.created_at).toISOString()).to.equal('2030-01-01T00:00:00.123Z');
      // Blob reference counts equal the live objects pointing at them.
      const refs = await sql.query<{ ref_count: number; refs: number }>(
        "SELECT b.ref_count, (SELECT count(*)::int FROM object_info o WHERE o.blob_id = b.id AND o.state <> 'DELETED') AS refs FROM blobs b",
      );
      for (const r of refs.rows) expect(Number(r.ref_count)).to.equal(Number(r.refs));
    });

    it('with two batches in flight, hands PGlite a second batch while the first waits for its answer, with the same outcome', async () => {
      // The first batch's answer is held back (as the PGlite thread holds it until its WAL sync) until a
      // second batch statement comes, or twenty event-loop turns have passed.
      let running = 0;
      let most = 0;
      let batchNo = 0;
      let secondCame: () => void = () => undefined;
      const second = new Promise<void>((resolve) => (secondCame = resolve));
      const turns = async (n: number) => {
        for (let t = 0; t < n; t++) await new Promise((resolve) => setImmediate(resolve));
      };
      const counting: SqlClient = {
        ...sql,
        query: async <R = Record<string, unknown>>(text: string, params?: unknown[]) => {
          if (!text.includes('strata_commit_objects')) return sql.query<R>(text, params);
          most = Math.max(most, ++running);
          const n = ++batchNo;
          if (n === 2) secondCame();
          try {
            const res = await sql.query<R>(text, params);
            if (n === 1) await Promise.race([second, turns(20)]);
            return res;
          } finally {
            running--;
          }
        },
      };
      const catalog = new Catalog(counting, { batchesInFlight: 2 });
      const reqs: CommitRequest[] = [];
      const results = await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          // Six turns of two commits each, on four keys.
          await turns(i >> 1);
          const req = commitOf(`pipelined-${i % 4}`, `p${i}`);
          reqs.push(req);
          return catalog.commitObject(req);
        }),
      );
      expect(most, 'batches running at once').to.equal(2);
      expect(results.every((r) => r.newBlobKept)).to.equal(true);
      // Each key ends with its last write: the batches ran in the order they were handed over.
      for (let k = 0; k < 4; k++) {
        const last = reqs.filter((r) => r.key === `pipelined-${k}`).at(-1)!;
        expect((await live(`pipelined-${k}`)).map((r) => r.etag)).to.deep.equal([last.etag]);
        expect(await events(`pipelined-${k}`)).to.equal(3);
      }
    });

    it('stores each inline blob of a batch with its own bytes', async () => {
      const catalog = new Catalog(sql);
      statements.length = 0;
      // Bytes of different lengths, one repeated (deduplicated onto the first), between blobs without bytes.
      const bodies = [Buffer.from('first bytes'), Buffer.alloc(0), Buffer.from([0, 255, 92, 120, 39, 0]), Buffer.from('first bytes'), Buffer.alloc(5000, 7)];
      const inlineOf = (key: string, data: Buffer, i: number) => {
        const md5 = createHash('md5').update(data).digest('hex');
        return commitOf(key, key, {
          blob: { kind: 'new', backendKey: 'fs', backend: { kind: 'fs' }, locator: `i${String(++seq).padStart(32, '0')}`, md5, size: data.length, data },
          etag: md5,
          md5,
          size: data.length,
          userMetadata: { i: String(i) },
        });
      };
      const reqs = bodies.flatMap((data, i) => [inlineOf(`inline-${i}`, data, i), commitOf(`file-${i}`, `f${i}`)]);
      const results = await Promise.all(reqs.map((r) => catalog.commitObject(r)));
      expect(
        statements.filter((s) => s.includes('strata_commit_objects')),
        'one batch',
      ).to.have.length(1);
      expect(results.map((r) => r.newBlobKept)).to.deep.equal([true, true, true, true, true, true, false, true, true, true]);
      for (const [i, data] of bodies.entries()) {
        const row = (
          await sql.query<{ data: Buffer | null }>(
            "SELECT b.data FROM object_info o JOIN blobs b ON b.id = o.blob_id WHERE o.bucket_id = $1 AND o.key = $2 AND o.state = 'NORMAL'",
            [bucket.id, `inline-${i}`],
          )
        ).rows[0]!;
        expect(row.data, `inline-${i}`).to.deep.equal(data);
      }
    });

    it('a failing commit in a batch fails alone: the others land, it leaves no row and no event', async () => {
      const catalog = new Catalog(sql);
      statements.length = 0;
      const good = Array.from({ length: 6 }, (_, i) => commitOf(`ok-${i}`, `ok${i}`));
      // content_type is NOT NULL: this commit's statement fails inside the batch.
      const bad = commitOf('bad', 'bad', { contentType: null as unknown as string });
      const gone = commitOf('gone', 'gone', { blob: { kind: 'existing', blobId: 987654 } });
      const noBucket = commitOf('nobucket', 'nob', { bucket: { ...bucket, id: 424242, name: 'deleted' } });
      const all = [good[0]!, good[1]!, bad, good[2]!, gone, good[3]!, noBucket, good[4]!, good[5]!];
      const results = await Promise.allSettled(all.map((r) => catalog.commitObject(r)));
      expect(results.map((r) => r.status)).to.deep.equal([
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
        'rejected',
        'fulfilled',
        'rejected',
        'fulfilled',
        'fulfilled',
      ]);
      expect((results[2] as PromiseRejectedResult).reason).to.have.property('code', '23502');
      expect((results[4] as PromiseRejectedResult).reason.constructor.name).to.equal('BlobGoneError');
      expect((results[6] as PromiseRejectedResult).reason)
        .to.be.instanceOf(S3Error)
        .and.have.property('code', 'NoSuchBucket');
      expect(
        statements.some((s) => s.includes('strata_commit_objects')),
        'a batch was tried',
      ).to.equal(true);
      for (let i = 0; i < 6; i++) {
        expect(await live(`ok-${i}`)).to.have.length(1);
        expect(await events(`ok-${i}`)).to.equal(1);
      }
      for (const key of ['bad', 'gone', 'nobucket']) {
        expect(await live(key)).to.have.length(0);
        expect(await events(key)).to.equal(0);
      }
    });

    it('commits one by one where group commit is off (the default on PostgreSQL): each a batch of one', async () => {
      const catalog = new Catalog(sql, { groupCommit: false });
      statements.length = 0;
      await Promise.all(Array.from({ length: 5 }, (_, i) => catalog.commitObject(commitOf(`single-${i}`, `s${i}`))));
      expect(statements.filter((s) => s.includes('strata_commit_objects'))).to.have.length(5);
      for (let i = 0; i < 5; i++) expect(await live(`single-${i}`)).to.have.length(1);
    });

    it('stores tags, headers and part sizes with each version, conditional commits included', async () => {
      const catalog = new Catalog(sql, { groupCommit: false });
      const tags = [
        { key: 'team', value: 'été' },
        { key: 'empty', value: '' },
      ];
      const headers = { 'cache-control': 'no-cache', 'x-amz-checksum-sha1': 'qZk+NkcGgWq6PiVxeFDCbJzQ2J0=', 'x-amz-checksum-type': 'FULL_OBJECT' };
      const stored = async (key: string) =>
        (
          await sql.query<{ tags: unknown; headers: unknown }>("SELECT tags, headers FROM object_info WHERE bucket_id = $1 AND key = $2 AND state = 'NORMAL'", [
            bucket.id,
            key,
          ])
        ).rows[0];
      const plain = await catalog.commitObject(commitOf('tagged-fn', 't1', { tags, headers }));
      expect([plain.meta.tags, plain.meta.headers]).to.deep.equal([tags, headers]);
      expect(await stored('tagged-fn')).to.deep.equal({ tags, headers });
      const conditional = await catalog.commitObject(commitOf('tagged-tx', 't2', { tags, headers, conditions: { ifNoneMatch: '*' } }));
      expect([conditional.meta.tags, conditional.meta.headers]).to.deep.equal([tags, headers]);
      expect(await stored('tagged-tx')).to.deep.equal({ tags, headers });
      // An overwrite without tags or headers leaves none (they belong to a version), and reads say so.
      await catalog.commitObject(commitOf('tagged-fn', 't3'));
      expect(await stored('tagged-fn')).to.deep.equal({ tags: null, headers: null });
      const overwritten = (await catalog.object(bucket, 'tagged-fn'))!;
      expect([overwritten.tags, overwritten.headers]).to.deep.equal([undefined, undefined]);
      const kept = (await catalog.object(bucket, 'tagged-tx'))!;
      expect([kept.tags, kept.headers]).to.deep.equal([tags, headers]);
      // A multipart completion's parts (its blob has no MD5), and checksums only with part sizes.
      const blob = { kind: 'new' as const, backendKey: 'fs', backend: { kind: 'fs' }, locator: 'mp-1', md5: null, size: 9 };
      await catalog.commitObject(commitOf('multipart', 'mp', { blob, size: 9, partSizes: [5, 4], partChecksums: ['AAAAAA==', 'AQEBAQ=='] }));
      const multipart = (await catalog.object(bucket, 'multipart'))!;
      expect([multipart.partSizes, multipart.partChecksums, multipart.locator]).to.deep.equal([[5, 4], ['AAAAAA==', 'AQEBAQ=='], 'mp-1']);
      await catalog.commitObject(commitOf('whole', 'wh', { partChecksums: ['AAAAAA=='] }));
      const whole = (await catalog.object(bucket, 'whole'))!;
      expect([whole.partSizes, whole.partChecksums]).to.deep.equal([undefined, undefined]);
    });

    it('checks a conditional commit again when its key changed after the check, in a batch as alone', async () => {
      /** The catalog's database, where another writer commits `write` right after a conditional commit read the key. */
      const racing = (write: CommitRequest) => {
        const state = { raced: false };
        const client: SqlClient = {
          ...sql,
          query: async (text, params) => {
            const res = await sql.query(text, params);
            if (!state.raced && text.includes('LEFT JOIN object_info')) {
              state.raced = true;
              await new Catalog(sql, { groupCommit: false }).commitObject(write);
            }
            return res as never;
          },
        };
        return { client, state };
      };
      for (const groupCommit of [true, false]) {
        const key = `raced-${groupCommit}`;
        const v1 = await new Catalog(sql).commitObject(commitOf(key, 'v1'));
        const replaced = racing(commitOf(key, 'v2'));
        const err = await new Catalog(replaced.client, { groupCommit })
          .commitObject(commitOf(key, 'v3', { conditions: { ifMatch: v1.meta.etag } }))
          .catch((e: unknown) => e);
        expect(replaced.state.raced, 'the other write came between check and commit').to.equal(true);
        expect(err).to.be.instanceOf(S3Error).and.have.property('code', 'PreconditionFailed');
        expect((await live(key)).map((r) => r.etag)).to.deep.equal(['v2'.padEnd(32, '0')]);
        expect(await events(key), 'no event for the refused write').to.equal(2);
        // If-None-Match: * against a key created in between.
        const key2 = `created-${groupCommit}`;
        const created = racing(commitOf(key2, 'other'));
        const refused = await new Catalog(created.client, { groupCommit })
          .commitObject(commitOf(key2, 'mine', { conditions: { ifNoneMatch: '*' } }))
          .catch((e: unknown) => e);
        expect(refused).to.be.instanceOf(S3Error).and.have.property('code', 'PreconditionFailed');
        expect((await live(key2)).map((r) => r.etag)).to.deep.equal(['other'.padEnd(32, '0')]);
      }
    });
  });
});
