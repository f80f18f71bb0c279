import { expect } from 'chai';
import { DEFAULT_BUCKET_NAME_HOLD_MS } from '../../images/control-plane/src/app.js';
import { BASELINE_VERSION, migrate } from '../../images/control-plane/src/schema/migrate.js';
import { ROOT, enc, eventually, type DbKind } from '../data-plane/harness.js';
import { metadataSuite } from './metadata-fixture.js';

for (const kind of ['pglite', 'postgres'] as DbKind[]) {
  describe(`control plane metadata on ${kind}`, function () {
    this.timeout(60_000);
    const fx = metadataSuite(kind);
    const { owner, newBucket, put, list, errorOf } = fx;

    describe('schema', () => {
      it('migrations are recorded and idempotent', async () => {
        expect(await migrate(fx.layer.sql)).to.deep.equal([]);
        const versions = await fx.layer.sql.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version');
        expect(versions.rows.map((r) => r.version)).to.include(BASELINE_VERSION);
      });

      it('object_info is partitioned by LIST (bucket_id % 2) and rows land in the partition bucket_id % 2 names', async () => {
        const keyDef = await fx.layer.sql.query<{ def: string }>("SELECT pg_get_partkeydef('object_info'::regclass) AS def");
        expect(keyDef.rows[0].def.replace(/\s+/g, '')).to.equal('LIST(((bucket_id%2)))');
        const parts = await fx.layer.sql.query<{ relname: string; bound: string }>(
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
        const rows = await fx.layer.sql.query<{ part: string; bucket_id: number; key: string }>(
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
        expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/buckets/${bucket}/objects?maxKeys=-1`))).to.deep.equal({
          status: 400,
          code: 'InvalidArgument',
        });
        expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/buckets/${bucket}/objects?continuationToken=zzz`))).to.deep.equal({
          status: 400,
          code: 'InvalidArgument',
        });
      });

      it('computes common prefixes correctly across many keys', async () => {
        const many = await newBucket();
        const { rows } = await fx.layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [many]);
        const bucketId = Number(rows[0].id);
        // Rows straight into the table: listing reads metadata only, and 2,500 uploads would be slow.
        await fx.layer.sql.query(
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

    describe('users and buckets', () => {
      it('creates users, verifies passwords and serves SigV4 secrets sealed at rest', async () => {
        const name = `user-${kind}-${Date.now()}`;
        const created = await fx.layer.cpFetch('POST', '/internal/users', { username: name, password: 'correct horse' });
        expect(created.status).to.equal(201);
        const creds = (await created.json()) as { username: string; accessKey: string; secretKey: string };
        expect(creds.accessKey).to.match(/^[A-Z2-7]{20}$/);
        expect(await errorOf(await fx.layer.cpFetch('POST', '/internal/users', { username: name, password: 'another one' }))).to.deep.equal({
          status: 409,
          code: 'InvalidArgument',
        });
        expect(await errorOf(await fx.layer.cpFetch('POST', '/internal/users', { username: 'x', password: 'short' }))).to.deep.equal({
          status: 400,
          code: 'InvalidArgument',
        });
        expect((await fx.layer.cpFetch('POST', '/internal/users/verify', { username: name, password: 'correct horse' })).status).to.equal(200);
        expect(await errorOf(await fx.layer.cpFetch('POST', '/internal/users/verify', { username: name, password: 'wrong horse' }))).to.deep.equal({
          status: 403,
          code: 'AccessDenied',
        });
        expect(await (await fx.layer.cpFetch('GET', `/internal/credentials/${creds.accessKey}`)).json()).to.deep.equal(creds);
        expect(await errorOf(await fx.layer.cpFetch('GET', '/internal/credentials/NOPE'))).to.deep.equal({ status: 403, code: 'InvalidAccessKeyId' });
        const row = await fx.layer.sql.query<{ password_hash: string; secret_key_enc: string }>(
          'SELECT password_hash, secret_key_enc FROM users WHERE username = $1',
          [name],
        );
        expect(row.rows[0].password_hash)
          .to.match(/^scrypt\$/)
          .and.not.include('correct horse');
        expect(row.rows[0].secret_key_enc).to.not.include(creds.secretKey);
      });

      it('bootstraps root with its user name as access key and its password as secret', async () => {
        expect(await (await fx.layer.cpFetch('GET', `/internal/credentials/${ROOT.user}`)).json()).to.deep.equal({
          username: ROOT.user,
          accessKey: ROOT.user,
          secretKey: ROOT.password,
        });
        expect((await fx.layer.cpFetch('POST', '/internal/users/verify', { username: ROOT.user, password: ROOT.password })).status).to.equal(200);
      });

      it('validates bucket names as S3 does and keeps names unique', async () => {
        for (const bad of ['ab', 'a'.repeat(64), 'Upper', 'has_underscore', '192.168.0.1', 'a..b', '-start', 'end-', 'a.-b', 'xn--abc']) {
          expect(await errorOf(await fx.layer.cpFetch('PUT', `/internal/buckets/${enc(bad)}`, { owner })), bad).to.deep.equal({
            status: 400,
            code: 'InvalidBucketName',
          });
        }
        const name = await newBucket();
        expect(await errorOf(await fx.layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner }))).to.deep.equal({
          status: 409,
          code: 'BucketAlreadyOwnedByYou',
        });
        expect(await errorOf(await fx.layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' }))).to.deep.equal({
          status: 409,
          code: 'BucketAlreadyExists',
        });
        const mine = (await (await fx.layer.cpFetch('GET', `/internal/users/${owner}/buckets`)).json()) as { buckets: Array<{ name: string }> };
        expect(mine.buckets.map((b) => b.name)).to.include(name);
        await put(name, 'obj', 'data');
        expect(await errorOf(await fx.layer.cpFetch('DELETE', `/internal/buckets/${name}`))).to.deep.equal({ status: 409, code: 'BucketNotEmpty' });
        await fx.layer.cpFetch('DELETE', `/internal/buckets/${name}/objects/obj`);
        expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
        expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/buckets/${name}`))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
      });

      it("holds a deleted bucket's name for its owner: another account gets OperationAborted until the hold is over", async () => {
        const saved = fx.layer.clock.now;
        const at = (seconds: number) => (fx.layer.clock.now = new Date(Date.UTC(2031, 0, 1) + seconds * 1000));
        const hold = DEFAULT_BUCKET_NAME_HOLD_MS / 1000; // s
        const half = hold / 2;
        const bucketsOf = async (who: string) =>
          ((await (await fx.layer.cpFetch('GET', `/internal/users/${who}/buckets`)).json()) as { buckets: Array<{ name: string }> }).buckets.map((b) => b.name);
        try {
          at(0);
          const name = await newBucket();
          expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
          at(half);
          const refused = await fx.layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' });
          const body = (await refused.clone().json()) as { error: { message: string } };
          expect(await errorOf(refused)).to.deep.equal({ status: 409, code: 'OperationAborted' });
          expect(body.error.message).to.include(new Date(Date.UTC(2031, 0, 1) + hold * 1000).toISOString());
          // Nothing was created, and the name still answers NoSuchBucket.
          expect(await errorOf(await fx.layer.cpFetch('GET', `/internal/buckets/${name}`))).to.deep.equal({ status: 404, code: 'NoSuchBucket' });
          expect(await bucketsOf('bob')).to.not.include(name);

          // Its last owner takes it back at once; deleting it again starts a new hold.
          expect((await fx.layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner })).status).to.equal(200);
          expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
          at(half + hold - 1); // 1 s before the second hold ends
          expect(await errorOf(await fx.layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' }))).to.deep.equal({
            status: 409,
            code: 'OperationAborted',
          });
          at(half + hold + 1);
          const taken = await fx.layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner: 'bob' });
          expect(taken.status, await taken.clone().text()).to.equal(200);
          expect(((await taken.json()) as { owner: string }).owner).to.equal('bob');
          expect(await bucketsOf('bob')).to.include(name);
          // The hold is gone with the create, and expired holds of other names are cleared by it.
          const holds = await fx.layer.sql.query<{ name: string }>('SELECT name FROM bucket_name_holds WHERE deleted_at < $1 OR name = $2', [
            new Date(Date.UTC(2031, 0, 1) + (half + 1) * 1000),
            name,
          ]);
          expect(holds.rows).to.deep.equal([]);
          expect((await fx.layer.cpFetch('DELETE', `/internal/buckets/${name}`)).status).to.equal(204);
        } finally {
          fx.layer.clock.now = saved;
        }
      });

      it('requires the internal token on every internal call', async () => {
        for (const headers of [{}, { 'x-strata-internal-token': 'wrong' }] as Array<Record<string, string>>) {
          const cp = await fetch(`${fx.layer.cp.url}/internal/users/${owner}/buckets`, { headers });
          expect(cp.status).to.equal(401);
          const dp = await fetch(`${fx.layer.dp.url}/internal/objects/b/k`, { headers });
          expect(dp.status).to.equal(401);
        }
        expect((await fetch(`${fx.layer.cp.url}/healthz`)).status).to.equal(200);
        expect((await fetch(`${fx.layer.cp.url}/readyz`)).status).to.equal(200);
      });
    });

    describe('event consumer', () => {
      it('counts objects per bucket from events, once per event id', async () => {
        const bucket = await newBucket();
        await put(bucket, 'one', '12345');
        await put(bucket, 'two', '123');
        await put(bucket, 'two', '1234567');
        await fx.layer.cpFetch('DELETE', `/internal/buckets/${bucket}/objects/one`);
        const stats = async () =>
          ((await (await fx.layer.cpFetch('GET', `/internal/buckets/${bucket}`)).json()) as { stats: { objectCount: number; bytes: number } }).stats;
        await eventually(async () => {
          expect(await stats()).to.deep.equal({ objectCount: 1, bytes: 7 });
        });
        const { rows } = await fx.layer.sql.query<{ id: number }>('SELECT id FROM buckets WHERE name = $1', [bucket]);
        const event = {
          id: `test-${kind}-${Date.now()}`,
          type: 'object.created',
          occurredAt: new Date().toISOString(),
          payload: { bucket, bucketId: Number(rows[0].id), key: 'z', size: 10, replacedSize: null },
        };
        await fx.layer.broker.publish(event);
        await fx.layer.broker.publish(event);
        await eventually(async () => {
          const done = await fx.layer.sql.query('SELECT 1 FROM processed_events WHERE event_id = $1', [event.id]);
          expect(done.rows).to.have.length(1);
        });
        await new Promise((r) => setTimeout(r, 100));
        expect(await stats()).to.deep.equal({ objectCount: 2, bytes: 17 });
        await eventually(async () => {
          const unsent = await fx.layer.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL');
          expect(Number(unsent.rows[0].n)).to.equal(0);
        });
      });
    });
  });
}
