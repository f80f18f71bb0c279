import { expect } from 'chai';
import { BASELINE_VERSION, migrate } from '../../images/control-plane/src/schema/migrate.js';
import { ROOT, enc, eventually, startObjectLayer, type DbKind, type ObjectLayer } from '../data-plane/harness.js';

interface ListPage {
  objects: Array<{ key: string }>;
  commonPrefixes: string[];
  isTruncated: boolean;
  nextContinuationToken?: string;
  nextMarker?: string;
}

const DAY = 24 * 3600 * 1000;

for (const kind of ['pglite', 'postgres'] as DbKind[]) {
  describe(`control plane metadata on ${kind}`, function () {
    this.timeout(60_000);
    let layer: ObjectLayer;
    let seq = 0;
    const owner = 'alice';

    before(async () => {
      // Bodies in files: the purge test below checks that freed bytes leave the disk (inline blobs: test/data-plane/objects.test.ts).
      layer = await startObjectLayer(kind, { inlineBlobBytes: 0 });
    });
    after(async () => {
      await layer?.stop();
    });

    const newBucket = async (): Promise<string> => {
      const name = `bkt-${kind}-${++seq}`;
      const res = await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner });
      expect(res.status, await res.clone().text()).to.equal(200);
      return name;
    };
    const put = async (bucket: string, key: string, body: string, who = owner) => {
      const res = await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key)}`, body, { 'x-strata-owner': who, 'content-type': 'text/plain' });
      expect(res.status, await res.clone().text()).to.equal(200);
      return (await res.json()) as { object: { etag: string; size: number }; instant: boolean };
    };
    const list = async (bucket: string, query: Record<string, string>): Promise<ListPage> => {
      const res = await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects?${new URLSearchParams(query)}`);
      expect(res.status, await res.clone().text()).to.equal(200);
      return (await res.json()) as ListPage;
    };
    const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });

    describe('schema', () => {
      it('migrations are recorded and idempotent', async () => {
        expect(await migrate(layer.sql)).to.deep.equal([]);
        const versions = await layer.sql.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version');
        expect(versions.rows.map((r) => r.version)).to.include(BASELINE_VERSION);
      });

      it('object_info is partitioned by LIST (bucket_id % 2) and rows land in the partition bucket_id % 2 names', async () => {
        const keyDef = await layer.sql.query<{ def: string }>("SELECT pg_get_partkeydef('object_info'::regclass) AS def");
        expect(keyDef.rows[0].def.replace(/\s+/g, '')).to.equal('LIST(((bucket_id%2)))');
        const parts = await layer.sql.query<{ relname: string; bound: string }>(
          `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'object_info'::regclass ORDER BY c.relname`,
        );
        expect(parts.rows).to.deep.equal([
          { relname: 'object_info_p0', bound: 'FOR VALUES IN (0)' },
          { relname: 'object_info_p1', bound: 'FOR VALUES IN (1)' },
        ]);
        const b1 = await newBucket();
        const b2 = await newBucket();
        await put(b1, 'one', 'x');
        await put(b2, 'two', 'y');
        const rows = await layer.sql.query<{ part: string; bucket_id: number; key: string }>(
          "SELECT tableoid::regclass::text AS part, bucket_id, key FROM object_info WHERE key IN ('one', 'two')",
        );
        expect(rows.rows).to.have.length(2);
        const ids = new Set(rows.rows.map((r) => Number(r.bucket_id) % 2));
        expect(ids.size, 'two consecutive buckets use both partitions').to.equal(2);
        for (const r of rows.rows) expect(r.part).to.equal(`object_info_p${Number(r.bucket_id) % 2}`);
      });
    });

    describe('listing', () => {
      let bucket: string;
      const keys = ['a', 'a/b', 'a0', 'Z', 'é', 'a/c/d', 'b', 'a/c/e'];
      const byteOrder = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));

      before(async () => {
        bucket = await newBucket();
        for (const k of keys) await put(bucket, k, `body of ${k}`);
      });

      it('lists every key in byte order (COLLATE "C")', async () => {
        const page = await list(bucket, {});
        expect(page.objects.map((o) => o.key)).to.deep.equal(byteOrder);
        expect(byteOrder).to.deep.equal(['Z', 'a', 'a/b', 'a/c/d', 'a/c/e', 'a0', 'b', 'é']);
        expect(page.isTruncated).to.equal(false);
      });

      it('groups keys under the delimiter into common prefixes', async () => {
        const top = await list(bucket, { delimiter: '/' });
        expect(top.objects.map((o) => o.key)).to.deep.equal(['Z', 'a', 'a0', 'b', 'é']);
        expect(top.commonPrefixes).to.deep.equal(['a/']);
        const inA = await list(bucket, { delimiter: '/', prefix: 'a/' });
        expect(inA.objects.map((o) => o.key)).to.deep.equal(['a/b']);
        expect(inA.commonPrefixes).to.deep.equal(['a/c/']);
      });

      it('pages with continuation tokens give every entry exactly once', async () => {
        for (const query of [{ delimiter: '/' }, {}, { prefix: 'a' }, { prefix: 'a', delimiter: '/' }] as Array<Record<string, string>>) {
          const whole = await list(bucket, query);
          const expected = [...whole.objects.map((o) => o.key), ...whole.commonPrefixes].sort();
          for (const maxKeys of ['1', '2', '3']) {
            const seen: string[] = [];
            let token: string | undefined;
            for (let i = 0; i < 20; i++) {
              const page = await list(bucket, { ...query, maxKeys, ...(token ? { continuationToken: token } : {}) });
              seen.push(...page.objects.map((o) => o.key), ...page.commonPrefixes);
              expect(page.objects.length + page.commonPrefixes.length).to.be.at.most(Number(maxKeys));
              if (!page.isTruncated) break;
              token = page.nextContinuationToken;
              expect(token).to.be.a('string');
            }
            expect(seen.sort(), `${JSON.stringify(query)} maxKeys ${maxKeys}`).to.deep.equal(expected);
          }
        }
      });

      it('pages with v1 markers, skipping a listed common prefix', async () => {
        const seen: string[] = [];
        let marker: string | undefined;
        for (let i = 0; i < 20; i++) {
          const page = await list(bucket, { delimiter: '/', maxKeys: '2', ...(marker ? { marker } : {}) });
          seen.push(...page.objects.map((o) => o.key), ...page.commonPrefixes);
          if (!page.isTruncated) break;
          marker = page.nextMarker;
        }
        expect(seen.sort()).to.deep.equal(['Z', 'a', 'a/', 'a0', 'b', 'é'].sort());
      });

      it('honours start-after and max-keys 0', async () => {
        expect((await list(bucket, { startAfter: 'a0' })).objects.map((o) => o.key)).to.deep.equal(['b', 'é']);
        const none = await list(bucket, { maxKeys: '0' });
        expect(none.objects).to.deep.equal([]);
        expect(none.commonPrefixes).to.deep.equal([]);
        expect(none.isTruncated).to.equal(false);
        expect(await errorOf(await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects?maxKeys=-1`))).to.deep.equal({
          status: 400,
          code: 'InvalidArgument',
        });
        expect(await errorOf(await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects?continuationToken=zzz`))).to.deep.equal({
          status: 400,
          code: 'InvalidArgument',
        });
      });

      it('computes common prefixes correctly across many keys', async () => {
        const many = await newBucket();
        const { rows } = await layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [many]);
        const bucketId = Number(rows[0].id);
        // Rows straight into the table: listing reads metadata only, and 2,500 uploads would be slow.
        await layer.sql.query(
          `INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, owner, last_modified)
           SELECT $1, k, 'NORMAL', 0, 1, 'e', 'e', 'text/plain', 'alice', now()
           FROM (SELECT 'many/' || lpad(i::text, 5, '0') AS k FROM generate_series(1, 1200) i
                 UNION ALL SELECT 'more/' || i || '/x' FROM generate_series(1, 1200) i
                 UNION ALL SELECT unnest(ARRAY['m1', 'n', 'many', 'mo'])) keys`,
          [bucketId],
        );
        const top = await list(many, { delimiter: '/' });
        expect(top.commonPrefixes).to.deep.equal(['many/', 'more/']);
        expect(top.objects.map((o) => o.key)).to.deep.equal(['m1', 'many', 'mo', 'n']);
        const more = await list(many, { delimiter: '/', prefix: 'more/', maxKeys: '1000' });
        expect(more.commonPrefixes).to.have.length(1000);
        expect(more.isTruncated).to.equal(true);
        const rest = await list(many, { delimiter: '/', prefix: 'more/', continuationToken: more.nextContinuationToken! });
        expect(rest.commonPrefixes).to.have.length(200);
        expect(new Set([...more.commonPrefixes, ...rest.commonPrefixes]).size).to.equal(1200);
        const flat = await list(many, { prefix: 'many/' });
        expect(flat.objects).to.have.length(1000);
        const flatRest = await list(many, { prefix: 'many/', continuationToken: flat.nextContinuationToken! });
        expect(flatRest.objects.map((o) => o.key)).to.have.length(200);
        expect(flatRest.objects[199].key).to.equal('many/01200');
      });
    });

    describe('recycle bin and purge', () => {
      it('soft delete hides, restore brings back, purge frees blob bytes only when unreferenced', async () => {
        const bucket = await newBucket();
        const content = `shared content ${kind} ${Date.now()}`;
        await put(bucket, 'x', content);
        await put(bucket, 'y', content);
        const blobFiles = (await layer.files()).filter((f) => f.startsWith('blobs/'));
        const blobRow = await layer.sql.query<{ locator: string; ref_count: number }>(
          `SELECT b.locator, b.ref_count FROM blobs b JOIN object_info o ON o.blob_id = b.id JOIN buckets k ON k.id = o.bucket_id
           WHERE k.name = $1 AND o.key = 'x'`,
          [bucket],
        );
        const locator = blobRow.rows[0].locator;
        expect(Number(blobRow.rows[0].ref_count)).to.equal(2);
        expect(blobFiles.filter((f) => f.endsWith(locator))).to.have.length(1);

        const start = new Date('2030-02-01T00:00:00Z');
        layer.clock.now = start;
        expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/x`)).status).to.equal(204);
        expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/absent`)).status).to.equal(204);
        expect(await errorOf(await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects/x`))).to.deep.equal({ status: 404, code: 'NoSuchKey' });
        expect((await layer.dpFetch('GET', `/internal/objects/${bucket}/x`)).status).to.equal(404);
        expect((await list(bucket, {})).objects.map((o) => o.key)).to.deep.equal(['y']);

        const bin = (await (await layer.cpFetch('GET', `/internal/recycle-bin?owner=${owner}&bucket=${bucket}`)).json()) as {
          objects: Array<{ id: number; key: string; recycledAt: string }>;
        };
        expect(bin.objects.map((o) => o.key)).to.deep.equal(['x']);
        expect(bin.objects[0].recycledAt).to.equal(start.toISOString());
        expect((await layer.cpFetch('POST', `/internal/recycle-bin/${bin.objects[0].id}/restore`, { owner: 'mallory' })).status).to.equal(404);
        const restored = await layer.cpFetch('POST', `/internal/recycle-bin/${bin.objects[0].id}/restore`, { owner });
        expect(restored.status).to.equal(200);
        expect(((await restored.json()) as { key: string }).key).to.equal('x');
        expect(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/x`)).text()).to.equal(content);

        // Recycle both; purge runs 31 days later for x only.
        await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/x`);
        layer.clock.now = new Date(start.getTime() + 20 * DAY);
        await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/y`);
        const early = (await (await layer.cpFetch('POST', '/internal/purge', { now: new Date(start.getTime() + 29 * DAY).toISOString() })).json()) as {
          purged: number;
        };
        expect(early.purged).to.equal(0);
        const first = (await (await layer.cpFetch('POST', '/internal/purge', { now: new Date(start.getTime() + 31 * DAY).toISOString() })).json()) as {
          purged: number;
          freedBlobs: number;
        };
        expect(first).to.deep.equal({ purged: 1, freedBlobs: 0, expiredObjects: 0, abortedUploads: 0 });
        expect(
          (await layer.files()).some((f) => f.endsWith(locator)),
          'y still references the blob',
        ).to.equal(true);
        // Every event must be sent and consumed before the purge, or a late one escapes the log cleanup below.
        await eventually(async () => {
          const pending = await layer.sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM outbox o WHERE o.sent_at IS NULL OR NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.event_id = o.event_id)',
          );
          expect(Number(pending.rows[0].n)).to.equal(0);
        });
        // The event logs as they stand now: the second purge must forget these (its own object.purged
        // events are published at once and consumed with the database's clock, so they are not counted).
        const logged = (await layer.sql.query<{ event_id: string }>('SELECT event_id FROM outbox UNION SELECT event_id FROM processed_events')).rows.map(
          (r) => r.event_id,
        );
        expect(logged.length).to.be.greaterThan(0);
        // The injected clock drives the default "now" of purge.
        layer.clock.now = new Date(start.getTime() + 51 * DAY);
        const second = (await (await layer.cpFetch('POST', '/internal/purge', {})).json()) as { purged: number; freedBlobs: number };
        expect(second).to.deep.equal({ purged: 1, freedBlobs: 1, expiredObjects: 0, abortedUploads: 0 });
        expect(
          (await layer.files()).some((f) => f.endsWith(locator)),
          'bytes freed',
        ).to.equal(false);
        const states = await layer.sql.query<{ state: string }>(
          'SELECT o.state FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 ORDER BY o.key, o.id',
          [bucket],
        );
        expect(states.rows.map((r) => r.state)).to.deep.equal(['DELETED', 'DELETED']);
        // Purge also forgets event logs older than the retention.
        const oldLogs = await layer.sql.query<{ n: number }>(
          'SELECT (SELECT count(*) FROM outbox WHERE sent_at < $1 AND event_id = ANY($2)) + (SELECT count(*) FROM processed_events WHERE processed_at < $1 AND event_id = ANY($2)) AS n',
          [new Date(start.getTime() + 21 * DAY), logged],
        );
        expect(Number(oldLogs.rows[0].n)).to.equal(0);
        // DELETED versions are forgotten once older than the retention too (x became DELETED on day 31,
        // y on day 51; a purge on day 75 keeps what is newer than day 45).
        const third = await layer.cpFetch('POST', '/internal/purge', { now: new Date(start.getTime() + 75 * DAY).toISOString() });
        expect(third.status).to.equal(200);
        const left = await layer.sql.query<{ key: string; state: string }>(
          'SELECT o.key, o.state FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 ORDER BY o.key, o.id',
          [bucket],
        );
        expect(left.rows).to.deep.equal([{ key: 'y', state: 'DELETED' }]);
      });

      it('DeleteObjects recycles many keys and reports bad ones', async () => {
        const bucket = await newBucket();
        await put(bucket, 'k1', '1');
        await put(bucket, 'k2', '2');
        const res = await layer.cpFetch('POST', `/internal/buckets/${bucket}/delete-objects`, { keys: ['k1', 'k2', 'nope', 'bad/../key'] });
        const body = (await res.json()) as { deleted: string[]; errors: Array<{ key: string; code: string }> };
        expect(body.deleted).to.deep.equal(['k1', 'k2', 'nope']);
        expect(body.errors).to.deep.equal([{ key: 'bad/../key', code: 'InvalidObjectName', message: 'object keys must not contain a ".." segment' }]);
        expect((await list(bucket, {})).objects).to.deep.equal([]);
        // One object.recycled event per recycled object, as DeleteObject writes it, with its own id.
        const events = await layer.sql.query<{ event_id: string; payload: Record<string, unknown> }>(
          "SELECT event_id, payload FROM outbox WHERE type = 'object.recycled' AND payload->>'bucket' = $1 ORDER BY id",
          [bucket],
        );
        const bucketId = Number((await layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [bucket])).rows[0].id);
        expect(events.rows.map((r) => r.payload)).to.deep.equal([
          { bucket, bucketId, key: 'k1', size: 1, owner },
          { bucket, bucketId, key: 'k2', size: 1, owner },
        ]);
        expect(new Set(events.rows.map((r) => r.event_id)).size).to.equal(2);
        // Deleting them again recycles nothing more.
        const again = (await (await layer.cpFetch('POST', `/internal/buckets/${bucket}/delete-objects`, { keys: ['k1', 'k2'] })).json()) as {
          deleted: string[];
        };
        expect(again.deleted).to.deep.equal(['k1', 'k2']);
        expect((await layer.sql.query("SELECT 1 FROM outbox WHERE type = 'object.recycled' AND payload->>'bucket' = $1", [bucket])).rows.length).to.equal(2);
      });

      it('a conditional delete recycles only an object that meets its conditions; NoSuchKey when there is none', async () => {
        const bucket = await newBucket();
        const { object } = await put(bucket, 'c', 'four');
        const head = await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects/c`);
        const lastModified = ((await head.json()) as { lastModified: string }).lastModified;
        const del = (key: string, query: Record<string, string>) =>
          layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/${key}?${new URLSearchParams(query)}`);
        expect(await errorOf(await del('c', { ifMatch: '"0123"' }))).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
        expect(await errorOf(await del('c', { ifMatch: object.etag, size: '5' }))).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
        expect(await errorOf(await del('c', { lastModifiedTime: new Date(Date.parse(lastModified) - 2000).toISOString() }))).to.deep.equal({
          status: 412,
          code: 'PreconditionFailed',
        });
        expect(await errorOf(await del('c', { size: 'four' }))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
        expect(await errorOf(await del('missing', { ifMatch: '*' }))).to.deep.equal({ status: 404, code: 'NoSuchKey' });
        expect((await list(bucket, {})).objects.map((o) => o.key)).to.deep.equal(['c']);
        expect((await del('c', { ifMatch: `"${object.etag}"`, size: '4', lastModifiedTime: lastModified })).status).to.equal(204);
        expect((await list(bucket, {})).objects).to.deep.equal([]);

        await put(bucket, 'd1', 'one');
        await put(bucket, 'd2', 'two');
        const res = await layer.cpFetch('POST', `/internal/buckets/${bucket}/delete-objects`, {
          objects: [{ key: 'd1', ifMatch: '*' }, { key: 'd2', size: 99 }, { key: 'd3', ifMatch: '*' }, { key: 'd4' }],
        });
        const body = (await res.json()) as { deleted: string[]; errors: Array<{ key: string; code: string }> };
        expect(body.deleted).to.deep.equal(['d1', 'd4']);
        expect(body.errors.map((e) => [e.key, e.code])).to.deep.equal([
          ['d2', 'PreconditionFailed'],
          ['d3', 'NoSuchKey'],
        ]);
        expect((await list(bucket, {})).objects.map((o) => o.key)).to.deep.equal(['d2']);
      });

      it('the recycle bin is listed in pages (bucket, key, newest version first), by prefix, with tokens it gave', async () => {
        const a = await newBucket();
        const b = await newBucket();
        for (const [bucket, key] of [
          [a, 'x/1'],
          [a, 'x/2'],
          [a, 'y/1'],
          [b, 'x/1'],
          [b, 'x/3'],
        ]) {
          await put(bucket, key, key);
          expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/${enc(key)}`)).status).to.equal(204);
        }
        // A second recycled version of a/x/2: listed before the first.
        await put(a, 'x/2', 'second');
        await layer.cpFetch('DELETE', `/internal/buckets/${a}/objects/${enc('x/2')}`);
        type Page = { objects: Array<{ id: number; bucket: string; key: string; size: number }>; nextToken?: string };
        const page = async (query: Record<string, string>) => {
          const res = await layer.cpFetch('GET', `/internal/recycle-bin?${new URLSearchParams({ owner, ...query })}`);
          expect(res.status, await res.clone().text()).to.equal(200);
          return (await res.json()) as Page;
        };
        const all: Page['objects'] = [];
        let token: string | undefined;
        let pages = 0;
        do {
          const p = await page({ limit: '2', ...(token ? { after: token } : {}) });
          expect(p.objects.length).to.be.at.most(2);
          all.push(...p.objects.filter((o) => o.bucket === a || o.bucket === b));
          token = p.nextToken;
          pages++;
        } while (token && pages < 100);
        expect(all.map((o) => `${o.bucket === a ? 'a' : 'b'}:${o.key}:${o.size}`)).to.deep.equal([
          'a:x/1:3',
          'a:x/2:6',
          'a:x/2:3',
          'a:y/1:3',
          'b:x/1:3',
          'b:x/3:3',
        ]);
        expect(new Set(all.map((o) => o.id)).size).to.equal(6);
        const xs = await page({ bucket: a, prefix: 'x/' });
        expect([xs.objects.map((o) => o.key), xs.nextToken]).to.deep.equal([['x/1', 'x/2', 'x/2'], undefined]);
        expect(await errorOf(await layer.cpFetch('GET', `/internal/recycle-bin?after=not-a-token`))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
        expect(await errorOf(await layer.cpFetch('GET', `/internal/recycle-bin?limit=0`))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
        expect(await errorOf(await layer.cpFetch('GET', `/internal/recycle-bin?limit=1001`))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      });

      // Only on PostgreSQL: PGlite has one connection, so no write can be in progress beside the delete there.
      if (kind === 'postgres')
        it('a conditional delete waits for a write of the key in progress and checks what it wrote', async () => {
          const bucket = await newBucket();
          const old = await put(bucket, 'raced', 'old');
          let deleting: Promise<Response> | undefined;
          // A commit of the key (the data plane's hold this lock) that changes the object, still open
          // when the delete arrives: the delete must check the object as that commit leaves it.
          await layer.sql.transaction(async (tx) => {
            await tx.query("SELECT pg_advisory_xact_lock(id, hashtext('raced')) FROM buckets WHERE name = $1", [bucket]);
            await tx.query(
              "UPDATE object_info SET etag = 'rewritten' WHERE key = 'raced' AND state = 'NORMAL' AND bucket_id = (SELECT id FROM buckets WHERE name = $1)",
              [bucket],
            );
            deleting = layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/raced?ifMatch=${old.object.etag}`);
            await new Promise((r) => setTimeout(r, 300));
          });
          const answered = await deleting!;
          expect(answered.status, 'the delete checked the rewritten ETag').to.equal(412);
          expect(await errorOf(answered)).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
          expect((await list(bucket, {})).objects.map((o) => o.key)).to.deep.equal(['raced']);
        });
    });

    describe('users and buckets', () => {
      it('creates users, verifies passwords and serves SigV4 secrets sealed at rest', async () => {
        const name = `user-${kind}-${Date.now()}`;
        const created = await layer.cpFetch('POST', '/internal/users', { username: name, password: 'correct horse' });
        expect(created.status).to.equal(201);
        const creds = (await created.json()) as { username: string; accessKey: string; secretKey: string };
        expect(creds.accessKey).to.match(/^[A-Z2-7]{20}$/);
        expect(await errorOf(await layer.cpFetch('POST', '/internal/users', { username: name, password: 'another one' }))).to.deep.equal({
          status: 409,
          code: 'InvalidArgument',
        });
        expect(await errorOf(await layer.cpFetch('POST', '/internal/users', { username: 'x', password: 'short' }))).to.deep.equal({
          status: 400,
          code: 'InvalidArgument',
        });
        expect((await layer.cpFetch('POST', '/internal/users/verify', { username: name, password: 'correct horse' })).status).to.equal(200);
        expect(await errorOf(await layer.cpFetch('POST', '/internal/users/verify', { username: name, password: 'wrong horse' }))).to.deep.equal({
          status: 403,
          code: 'AccessDenied',
        });
        expect(await (await layer.cpFetch('GET', `/internal/credentials/${creds.accessKey}`)).json()).to.deep.equal(creds);
        expect(await errorOf(await layer.cpFetch('GET', '/internal/credentials/NOPE'))).to.deep.equal({ status: 403, code: 'InvalidAccessKeyId' });
        const row = await layer.sql.query<{ password_hash: string; secret_key_enc: string }>(
          'SELECT password_hash, secret_key_enc FROM users WHERE username = $1',
          [name],
        );
        expect(row.rows[0].password_hash)
          .to.match(/^scrypt\$/)
          .and.not.include('correct horse');
        expect(row.rows[0].secret_key_enc).to.not.include(creds.secretKey);
      });

      it('bootstraps root with its user name as access key and its password as secret', async () => {
        expect(await (await layer.cpFetch('GET', `/internal/credentials/${ROOT.user}`)).json()).to.deep.equal({
          username: ROOT.user,
          accessKey: ROOT.user,
          secretKey: ROOT.password,
        });
        expect((await layer.cpFetch('POST', '/internal/users/verify', { username: ROOT.user, password: ROOT.password })).status).to.equal(200);
      });

      it('validates bucket names as S3 does and keeps names unique', async () => {
        for (const bad of ['ab', 'a'.repeat(64), 'Upper', 'has_underscore', '192.168.0.1', 'a..b', '-start', 'end-', 'a.-b', 'xn--abc']) {
          expect(await errorOf(await layer.cpFetch('PUT', `/internal/buckets/${enc(bad)}`, { owner })), bad).to.deep.equal({
            status: 400,
            code: 'InvalidBucketName',
          });
        }
        const name = await newBucket();
        expect(await errorOf(await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner }))).to.deep.equal({
          status: 409,
          code: 'BucketAlreadyOwnedByYou',
        });
        expect(await errorOf(await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' }))).to.deep.equal({
          status: 409,
          code: 'BucketAlreadyExists',
        });
        const mine = (await (await layer.cpFetch('GET', `/internal/users/${owner}/buckets`)).json()) as { buckets: Array<{ name: string }> };
        expect(mine.buckets.map((b) => b.name)).to.include(name);
        await put(name, 'obj', 'data');
        expect(await errorOf(await layer.cpFetch('DELETE', `/internal/buckets/${name}`))).to.deep.equal({ status: 409, code: 'BucketNotEmpty' });
        await layer.cpFetch('DELETE', `/internal/buckets/${name}/objects/obj`);
        expect((await layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
        expect(await errorOf(await layer.cpFetch('GET', `/internal/buckets/${name}`))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      });

      it("holds a deleted bucket's name for its owner: another account gets OperationAborted until the hold is over", async () => {
        const saved = layer.clock.now;
        const at = (seconds: number) => (layer.clock.now = new Date(Date.UTC(2031, 0, 1) + seconds * 1000));
        const bucketsOf = async (who: string) =>
          ((await (await layer.cpFetch('GET', `/internal/users/${who}/buckets`)).json()) as { buckets: Array<{ name: string }> }).buckets.map((b) => b.name);
        try {
          at(0);
          const name = await newBucket();
          expect((await layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
          at(30);
          const refused = await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' });
          const body = (await refused.clone().json()) as { error: { message: string } };
          expect(await errorOf(refused)).to.deep.equal({ status: 409, code: 'OperationAborted' });
          expect(body.error.message).to.include('2031-01-01T00:01:00.000Z');
          // Nothing was created, and the name still answers NoSuchBucket.
          expect(await errorOf(await layer.cpFetch('GET', `/internal/buckets/${name}`))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
          expect(await bucketsOf('bob')).to.not.include(name);

          // Its last owner takes it back at once; deleting it again starts a new hold.
          expect((await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner })).status).to.equal(200);
          expect((await layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
          at(89); // 59 s after the second delete
          expect(await errorOf(await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' }))).to.deep.equal({
            status: 409,
            code: 'OperationAborted',
          });
          at(91);
          const taken = await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' });
          expect(taken.status, await taken.clone().text()).to.equal(200);
          expect(((await taken.json()) as { owner: string }).owner).to.equal('bob');
          expect(await bucketsOf('bob')).to.include(name);
          // The hold is gone with the create, and expired holds of other names are cleared by it.
          const holds = await layer.sql.query<{ name: string }>('SELECT name FROM bucket_name_holds WHERE deleted_at < $1 OR name = $2', [
            new Date(Date.UTC(2031, 0, 1, 0, 0, 31)),
            name,
          ]);
          expect(holds.rows).to.deep.equal([]);
          expect((await layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
        } finally {
          layer.clock.now = saved;
        }
      });

      it('requires the internal token on every internal call', async () => {
        for (const headers of [{}, { 'x-strata-internal-token': 'wrong' }] as Array<Record<string, string>>) {
          const cp = await fetch(`${layer.cp.url}/internal/users/${owner}/buckets`, { headers });
          expect(cp.status).to.equal(401);
          const dp = await fetch(`${layer.dp.url}/internal/objects/b/k`, { headers });
          expect(dp.status).to.equal(401);
        }
        expect((await fetch(`${layer.cp.url}/healthz`)).status).to.equal(200);
        expect((await fetch(`${layer.cp.url}/readyz`)).status).to.equal(200);
      });
    });

    describe('event consumer', () => {
      it('counts objects per bucket from events, once per event id', async () => {
        const bucket = await newBucket();
        await put(bucket, 'one', '12345');
        await put(bucket, 'two', '123');
        await put(bucket, 'two', '1234567');
        await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/one`);
        const stats = async () =>
          ((await (await layer.cpFetch('GET', `/internal/buckets/${bucket}`)).json()) as { stats: { objectCount: number; bytes: number } }).stats;
        await eventually(async () => {
          expect(await stats()).to.deep.equal({ objectCount: 1, bytes: 7 });
        });
        const { rows } = await layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [bucket]);
        const event = {
          id: `test-${kind}-${Date.now()}`,
          type: 'object.created',
          occurredAt: new Date().toISOString(),
          payload: { bucket, bucketId: Number(rows[0].id), key: 'z', size: 10, replacedSize: null },
        };
        await layer.broker.publish(event);
        await layer.broker.publish(event);
        await eventually(async () => {
          const done = await layer.sql.query('SELECT 1 FROM processed_events WHERE event_id = $1', [event.id]);
          expect(done.rows).to.have.length(1);
        });
        await new Promise((r) => setTimeout(r, 100));
        expect(await stats()).to.deep.equal({ objectCount: 2, bytes: 17 });
        await eventually(async () => {
          const unsent = await layer.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL');
          expect(Number(unsent.rows[0].n)).to.equal(0);
        });
      });
    });
  });
}
