import { expect } from 'chai';
import { enc, eventually, type DbKind } from '../data-plane/harness.js';
import { metadataSuite } from './metadata-fixture.js';
import { internalPurge } from '../support/admin-jobs.js';

const DAY = 24 * 3600 * 1000;

for (const kind of ['pglite', 'postgres'] as DbKind[]) {
  describe(`control plane recycle bin and purge on ${kind}`, function () {
    this.timeout(60_000);
    const fx = metadataSuite(kind);
    const { owner, newBucket, put, list, errorOf } = fx;

    describe('recycle bin and purge', () => {
      it('soft delete hides, restore brings back, purge frees blob bytes only when unreferenced', async () => {
        const bucket = await newBucket();
        const content = `shared content ${kind} ${Date.now()}`;
        await put(bucket, 'x', content);
        await put(bucket, 'y', content);
        const blobFiles = (await fx.layer.files()).filter((f) => f.startsWith('blobs/'));
        const blobRow = await fx.layer.sql.query<{ locator: string; ref_count: number }>(
          `SELECT b.locator, b.ref_count FROM blobs b JOIN object_info o ON o.blob_id = b.id JOIN buckets k ON k.id = o.bucket_id
           WHERE k.name = $1 AND o.key = 'x'`,
          [bucket],
        );
        const locator = blobRow.rows[0].locator;
        expect(Number(blobRow.rows[0].ref_count)).to.equal(2);
        expect(blobFiles.filter((f) => f.endsWith(locator))).to.have.length(1);

        const start = new Date('2030-02-01T00:00:00Z');
        fx.layer.clock.now = start;
        expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/x`)).status).to.equal(204);
        expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/absent`)).status).to.equal(204);
        expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/buckets/${bucket}/objects/x`))).to.deep.equal({ status: 404, code: 'NoSuchKey' });
        expect((await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/x`)).status).to.equal(404);
        expect((await list(bucket, {})).objects.map((o) => o.key)).to.deep.equal(['y']);

        const bin = (await (await fx.layer.cpFetch('GET', `/internal/recycle-bin?owner=${owner}&bucket=${bucket}`)).json()) as {
          objects: Array<{ id: number; key: string; recycledAt: string }>;
        };
        expect(bin.objects.map((o) => o.key)).to.deep.equal(['x']);
        expect(bin.objects[0].recycledAt).to.equal(start.toISOString());
        expect((await fx.layer.cpFetch('POST', `/internal/recycle-bin/${bin.objects[0].id}/restore`, { owner: 'mallory' })).status).to.equal(404);
        const restored = await fx.layer.cpFetch('POST', `/internal/recycle-bin/${bin.objects[0].id}/restore`, { owner });
        expect(restored.status).to.equal(200);
        expect(((await restored.json()) as { key: string }).key).to.equal('x');
        expect(await (await fx.layer.dpFetch('GET', `/internal/objects/${bucket}/x`)).text()).to.equal(content);

        // Recycle both; purge runs 31 days later for x only.
        await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/x`);
        fx.layer.clock.now = new Date(start.getTime() + 20 * DAY);
        await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/y`);
        const early = await internalPurge(fx.layer.cpFetch, { now: new Date(start.getTime() + 29 * DAY).toISOString() });
        expect(early.purged).to.equal(0);
        const first = await internalPurge(fx.layer.cpFetch, { now: new Date(start.getTime() + 31 * DAY).toISOString() });
        expect(first).to.deep.equal({ purged: 1, freedBlobs: 0, expiredObjects: 0, abortedUploads: 0 });
        expect(
          (await fx.layer.files()).some((f) => f.endsWith(locator)),
          'y still references the blob',
        ).to.equal(true);
        // Every event must be sent and consumed before the purge, or a late one escapes the log cleanup below.
        await eventually(async () => {
          const pending = await fx.layer.sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM outbox o WHERE o.sent_at IS NULL OR NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.event_id = o.event_id)',
          );
          expect(Number(pending.rows[0].n)).to.equal(0);
        });
        // The event logs as they stand now: the second purge must forget these (its own object.purged
        // events are published at once and consumed with the database's clock, so they are not counted).
        const logged = (await fx.layer.sql.query<{ event_id: string }>('SELECT event_id FROM outbox UNION SELECT event_id FROM processed_events')).rows.map(
          (r) => r.event_id,
        );
        expect(logged.length).to.be.greaterThan(0);
        // The injected clock drives the default "now" of purge.
        fx.layer.clock.now = new Date(start.getTime() + 51 * DAY);
        const second = await internalPurge(fx.layer.cpFetch);
        expect(second).to.deep.equal({ purged: 1, freedBlobs: 1, expiredObjects: 0, abortedUploads: 0 });
        expect(
          (await fx.layer.files()).some((f) => f.endsWith(locator)),
          'bytes freed',
        ).to.equal(false);
        const states = await fx.layer.sql.query<{ state: string }>(
          'SELECT o.state FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 ORDER BY o.key, o.id',
          [bucket],
        );
        expect(states.rows.map((r) => r.state)).to.deep.equal(['DELETED', 'DELETED']);
        // Purge also forgets event logs older than the retention.
        const oldLogs = await fx.layer.sql.query<{ n: number }>(
          'SELECT (SELECT count(*) FROM outbox WHERE sent_at < $1 AND event_id = ANY($2)) + (SELECT count(*) FROM processed_events WHERE processed_at < $1 AND event_id = ANY($2)) AS n',
          [new Date(start.getTime() + 21 * DAY), logged],
        );
        expect(Number(oldLogs.rows[0].n)).to.equal(0);
        // DELETED versions are forgotten once older than the retention too (x became DELETED on day 31,
        // y on day 51; a purge on day 75 keeps what is newer than day 45).
        await internalPurge(fx.layer.cpFetch, { now: new Date(start.getTime() + 75 * DAY).toISOString() });
        const left = await fx.layer.sql.query<{ key: string; state: string }>(
          'SELECT o.key, o.state FROM object_info o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = $1 ORDER BY o.key, o.id',
          [bucket],
        );
        expect(left.rows).to.deep.equal([{ key: 'y', state: 'DELETED' }]);
      });

      it('DeleteObjects recycles many keys and reports bad ones', async () => {
        const bucket = await newBucket();
        await put(bucket, 'k1', '1');
        await put(bucket, 'k2', '2');
        const res = await fx.layer.cpFetch('POST', `/internal/buckets/${bucket}/delete-objects`, { keys: ['k1', 'k2', 'nope', 'bad/../key'] });
        const body = (await res.json()) as { deleted: string[]; errors: Array<{ key: string; code: string }> };
        expect(body.deleted).to.deep.equal(['k1', 'k2', 'nope']);
        expect(body.errors).to.deep.equal([{ key: 'bad/../key', code: 'InvalidObjectName', message: 'object keys must not contain a ".." segment' }]);
        expect((await list(bucket, {})).objects).to.deep.equal([]);
        // One object.recycled event per recycled object, as DeleteObject writes it, with its own id.
        const events = await fx.layer.sql.query<{ event_id: string; payload: Record<string, unknown> }>(
          "SELECT event_id, payload FROM outbox WHERE type = 'object.recycled' AND payload->>'bucket' = $1 ORDER BY id",
          [bucket],
        );
        const bucketId = Number((await fx.layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [bucket])).rows[0].id);
        expect(events.rows.map((r) => r.payload)).to.deep.equal([
          { bucket, bucketId, key: 'k1', size: 1, owner },
          { bucket, bucketId, key: 'k2', size: 1, owner },
        ]);
        expect(new Set(events.rows.map((r) => r.event_id)).size).to.equal(2);
        // Deleting them again recycles nothing more.
        const again = (await (await fx.layer.cpFetch('POST', `/internal/buckets/${bucket}/delete-objects`, { keys: ['k1', 'k2'] })).json()) as {
          deleted: string[];
        };
        expect(again.deleted).to.deep.equal(['k1', 'k2']);
        expect((await fx.layer.sql.query("SELECT 1 FROM outbox WHERE type = 'object.recycled' AND payload->>'bucket' = $1", [bucket])).rows.length).to.equal(2);
      });

      it('a conditional delete recycles only an object that meets its conditions; NoSuchKey when there is none', async () => {
        const bucket = await newBucket();
        const { object } = await put(bucket, 'c', 'four');
        const head = await fx.layer.cpFetch('GET', `/internal/buckets/${bucket}/objects/c`);
        const lastModified = ((await head.json()) as { lastModified: string }).lastModified;
        const del = (key: string, query: Record<string, string>) =>
          fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/${key}?${new URLSearchParams(query)}`);
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
        const res = await fx.layer.cpFetch('POST', `/internal/buckets/${bucket}/delete-objects`, {
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
          expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/${enc(key)}`)).status).to.equal(204);
        }
        // A second recycled version of a/x/2: listed before the first.
        await put(a, 'x/2', 'second');
        await fx.layer.cpFetch('DELETE', `/internal/buckets/${a}/objects/${enc('x/2')}`);
        type Page = { objects: Array<{ id: number; bucket: string; key: string; size: number }>; nextToken?: string };
        const page = async (query: Record<string, string>) => {
          const res = await fx.layer.cpFetch('GET', `/internal/recycle-bin?${new URLSearchParams({ owner, ...query })}`);
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
        expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/recycle-bin?after=not-a-token`))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
        expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/recycle-bin?limit=0`))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
        expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/recycle-bin?limit=1001`))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
      });

      // Only on PostgreSQL: PGlite has one connection, so no write can be in progress beside the delete there.
      if (kind === 'postgres')
        it('a conditional delete waits for a write of the key in progress and checks what it wrote', async () => {
          const bucket = await newBucket();
          const old = await put(bucket, 'raced', 'old');
          let deleting: Promise<Response> | undefined;
          // A commit of the key (the data plane's hold this lock) that changes the object, still open
          // when the delete arrives: the delete must check the object as that commit leaves it.
          await fx.layer.sql.transaction(async (tx) => {
            await tx.query("SELECT pg_advisory_xact_lock(id, hashtext('raced')) FROM buckets WHERE name = $1", [bucket]);
            await tx.query(
              "UPDATE object_info SET etag = 'rewritten' WHERE key = 'raced' AND state = 'NORMAL' AND bucket_id = (SELECT id FROM buckets WHERE name = $1)",
              [bucket],
            );
            deleting = fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/raced?ifMatch=${old.object.etag}`);
            await new Promise((r) => setTimeout(r, 300));
          });
          const answered = await deleting!;
          expect(answered.status, 'the delete checked the rewritten ETag').to.equal(412);
          expect(await errorOf(answered)).to.deep.equal({ status: 412, code: 'PreconditionFailed' });
          expect((await list(bucket, {})).objects.map((o) => o.key)).to.deep.equal(['raced']);
        });
    });
  });
}
