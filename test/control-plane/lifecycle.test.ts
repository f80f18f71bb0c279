import { expect } from 'chai';
import type { StrataEvent } from '../../images/control-plane/src/metadata/store.js';
import type { LifecycleRule } from '../../images/object-model/src/index.js';
import { enc, eventually, startObjectLayer, type DbKind, type ObjectLayer } from '../data-plane/harness.js';
import { internalPurge, type PurgeResult } from '../support/admin-jobs.js';

const DAY = 24 * 3600 * 1000;

const rule = (id: string, over: Partial<LifecycleRule> & { prefix?: string }): LifecycleRule => {
  const { prefix = '', ...rest } = over;
  return { id, enabled: true, filter: { form: 'filter', prefix, tags: [] }, ...rest };
};

for (const kind of ['pglite', 'postgres'] as DbKind[]) {
  describe(`bucket lifecycle rules on ${kind} (control plane + data plane)`, function () {
    this.timeout(60_000);
    let layer: ObjectLayer;
    let seq = 0;
    const owner = 'alice';

    /** Every event the broker carries (a queue of the test's own beside the consumer's). */
    const published: StrataEvent[] = [];

    before(async () => {
      layer = await startObjectLayer(kind, { inlineBlobBytes: 0 });
      await layer.broker.subscribe('lifecycle-test', async (event) => {
        published.push(event);
      });
    });
    after(async () => {
      await layer?.stop();
    });

    const newBucket = async (): Promise<string> => {
      const name = `life-${kind}-${++seq}`;
      expect((await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner })).status).to.equal(200);
      return name;
    };
    const put = async (bucket: string, key: string, body: string) => {
      const res = await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key)}`, body, { 'x-strata-owner': owner });
      expect(res.status, await res.clone().text()).to.equal(200);
    };
    /** Objects' creation times, set in the database so that expiry boundaries can be tested to the millisecond. */
    const setLastModified = async (bucket: string, at: Date) => {
      await layer.sql.query('UPDATE object_info SET last_modified = $2 WHERE bucket_id = (SELECT id FROM buckets WHERE name = $1)', [bucket, at]);
    };
    const setRules = async (bucket: string, rules: LifecycleRule[]) => {
      const res = await layer.cpFetch('PUT', `/internal/buckets/${bucket}/lifecycle`, { rules });
      expect(res.status, await res.clone().text()).to.equal(204);
    };
    const keys = async (bucket: string): Promise<string[]> => {
      const page = (await (await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects`)).json()) as { objects: Array<{ key: string }> };
      return page.objects.map((o) => o.key);
    };
    const purge = async (now: Date): Promise<PurgeResult> => {
      return internalPurge(layer.cpFetch, { now: now.toISOString() });
    };
    const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });

    it("stores, answers and removes a bucket's rules; refuses a malformed rule list; a new bucket of the same name starts without rules", async () => {
      const bucket = await newBucket();
      expect(await errorOf(await layer.cpFetch('GET', `/internal/buckets/${bucket}/lifecycle`))).to.deep.equal({
        status: 404,
        code: 'NoSuchLifecycleConfiguration',
      });
      const rules = [rule('logs', { prefix: 'logs/', expiration: { days: 3 } }), rule('uploads', { abortIncompleteMultipartUploadDays: 2 })];
      await setRules(bucket, rules);
      expect(await (await layer.cpFetch('GET', `/internal/buckets/${bucket}/lifecycle`)).json()).to.deep.equal({ rules });
      for (const bad of [{}, { rules: [] }, { rules: 'x' }, { rules: [{ id: 'x' }] }]) {
        expect(await errorOf(await layer.cpFetch('PUT', `/internal/buckets/${bucket}/lifecycle`, bad))).to.deep.equal({ status: 400, code: 'MalformedXML' });
      }
      expect(await (await layer.cpFetch('GET', `/internal/buckets/${bucket}/lifecycle`)).json(), 'a refused list changes nothing').to.deep.equal({ rules });
      expect(await errorOf(await layer.cpFetch('PUT', '/internal/buckets/no-such-bucket-here/lifecycle', { rules }))).to.deep.equal({
        status: 404,
        code: 'NoSuchBucket',
      });
      expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}/lifecycle`)).status).to.equal(204);
      expect((await layer.cpFetch('GET', `/internal/buckets/${bucket}/lifecycle`)).status).to.equal(404);

      await setRules(bucket, rules);
      expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
      expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner })).status).to.equal(200);
      expect((await layer.cpFetch('GET', `/internal/buckets/${bucket}/lifecycle`)).status).to.equal(404);
    });

    it('expires what a rule selects at the midnight UTC S3 computes, into the recycle bin, and nothing else', async () => {
      const bucket = await newBucket();
      const other = await newBucket();
      for (const key of ['logs/a', 'logs/b-big', 'logs/midnight', 'logsX', 'keep/c', 'scratch/d'])
        await put(bucket, key, key === 'logs/b-big' ? 'x'.repeat(2000) : `body of ${key}`);
      await put(other, 'logs/a', 'another bucket');
      const created = new Date('2031-01-10T10:30:00Z');
      await setLastModified(bucket, created);
      await setLastModified(other, created);
      await layer.sql.query("UPDATE object_info SET last_modified = '2031-01-10T00:00:00Z' WHERE key = 'logs/midnight'");
      await setRules(bucket, [
        rule('small-logs', { prefix: 'logs/', expiration: { days: 3 }, filter: { form: 'and', prefix: 'logs/', tags: [], sizeLessThan: 1000 } }),
        rule('disabled', { prefix: 'keep/', expiration: { days: 1 }, enabled: false }),
        rule('tagged', { filter: { form: 'filter', prefix: '', tags: [{ key: 'k', value: 'v' }] }, expiration: { days: 1 } }),
      ]);
      // Read through the data plane first: its read cache must not keep serving the object once expired.
      expect((await layer.dpFetch('GET', `/internal/objects/${bucket}/logs%2Fa`)).status).to.equal(200);

      // Created at midnight, 3 days → expires exactly 3 days later.
      const midnightExpiry = new Date('2031-01-13T00:00:00Z');
      expect((await purge(new Date(midnightExpiry.getTime() - 1))).expiredObjects).to.equal(0);
      expect((await purge(midnightExpiry)).expiredObjects).to.equal(1);
      // Created 10:30 on the 10th, 3 days → expires 2031-01-14T00:00Z (the next midnight after the 13th 10:30).
      const expiry = new Date('2031-01-14T00:00:00Z');
      expect((await purge(new Date(expiry.getTime() - 1))).expiredObjects).to.equal(0);
      expect(await keys(bucket)).to.have.length(5);
      const run = await purge(expiry);
      expect(run.expiredObjects).to.equal(1);
      expect(await keys(bucket)).to.deep.equal(['keep/c', 'logs/b-big', 'logsX', 'scratch/d']);
      expect(await keys(other), 'rules are per bucket').to.deep.equal(['logs/a']);
      expect((await layer.dpFetch('GET', `/internal/objects/${bucket}/logs%2Fa`)).status).to.equal(404);
      const bin = (await (await layer.cpFetch('GET', `/internal/recycle-bin?bucket=${bucket}`)).json()) as {
        objects: Array<{ key: string; recycledAt: string }>;
      };
      expect(bin.objects.map((o) => [o.key, o.recycledAt])).to.deep.equal([
        ['logs/a', expiry.toISOString()],
        ['logs/midnight', midnightExpiry.toISOString()],
      ]);
      // Their events reach the broker (read there: each purge forgets sent outbox rows older than its retention).
      await eventually(async () => {
        const recycled = published
          .filter((e) => e.type === 'object.recycled' && e.payload.bucket === bucket)
          .map((e) => [e.payload.key, e.payload.size, e.payload.reason]);
        expect(recycled.sort()).to.deep.equal([
          ['logs/a', 'body of logs/a'.length, 'lifecycle'],
          ['logs/midnight', 'body of logs/midnight'.length, 'lifecycle'],
        ]);
      });
      // The bucket's counts follow the event, as for a DeleteObject.
      await eventually(async () => {
        const stats = (await (await layer.cpFetch('GET', `/internal/buckets/${bucket}`)).json()) as { stats: { objectCount: number } };
        expect(stats.stats.objectCount).to.equal(4);
      });
      // A second run the same day finds nothing more.
      expect((await purge(expiry)).expiredObjects).to.equal(0);
    });

    it('a Tag filter expires only objects carrying every tag it names, as written by PUT or by the tagging route', async () => {
      const bucket = await newBucket();
      const putTagged = async (key: string, tags: Array<{ key: string; value: string }>) => {
        const res = await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key)}`, 'body', {
          'x-strata-owner': owner,
          'x-strata-tags': JSON.stringify(tags),
        });
        expect(res.status, await res.clone().text()).to.equal(200);
      };
      await putTagged('both', [
        { key: 'scratch', value: 'true' },
        { key: 'team', value: 'a' },
        { key: 'extra', value: '1' },
      ]);
      await putTagged('scratch-only', [{ key: 'scratch', value: 'true' }]);
      await putTagged('wrong-value', [
        { key: 'scratch', value: 'false' },
        { key: 'team', value: 'a' },
      ]);
      await put(bucket, 'untagged', 'body');
      await put(bucket, 'tagged-later', 'body');
      const tagging = await layer.cpFetch('PUT', `/internal/buckets/${bucket}/objects/tagged-later/tagging`, {
        tags: [
          { key: 'team', value: 'a' },
          { key: 'scratch', value: 'true' },
        ],
      });
      expect(tagging.status, await tagging.clone().text()).to.equal(204);
      // The tagging route checks what it stores as S3 would, and needs the object.
      expect(
        await errorOf(await layer.cpFetch('PUT', `/internal/buckets/${bucket}/objects/untagged/tagging`, { tags: [{ key: 'aws:x', value: '1' }] })),
      ).to.deep.equal({ status: 400, code: 'InvalidTag' });
      expect(await errorOf(await layer.cpFetch('PUT', `/internal/buckets/${bucket}/objects/nothing-here/tagging`, { tags: [] }))).to.deep.equal({
        status: 404,
        code: 'NoSuchKey',
      });
      await setLastModified(bucket, new Date('2031-02-01T00:00:00Z'));
      await setRules(bucket, [
        rule('scratch-team-a', {
          filter: {
            form: 'and',
            prefix: '',
            tags: [
              { key: 'scratch', value: 'true' },
              { key: 'team', value: 'a' },
            ],
          },
          expiration: { days: 1 },
        }),
      ]);
      expect((await purge(new Date('2031-02-03T00:00:00Z'))).expiredObjects).to.equal(2);
      expect(await keys(bucket)).to.deep.equal(['scratch-only', 'untagged', 'wrong-value']);
    });

    it('a Date rule expires every object it selects from that date on, however new', async () => {
      const bucket = await newBucket();
      await put(bucket, 'tmp/old', 'o');
      await setLastModified(bucket, new Date('2031-03-01T00:00:00Z'));
      await setRules(bucket, [rule('cutover', { prefix: 'tmp/', expiration: { date: '2031-06-01T00:00:00.000Z' } })]);
      expect((await purge(new Date('2031-05-31T23:59:59Z'))).expiredObjects).to.equal(0);
      await put(bucket, 'tmp/new', 'n');
      await put(bucket, 'kept', 'k');
      await setLastModified(bucket, new Date('2031-06-05T00:00:00Z'));
      expect((await purge(new Date('2031-06-05T12:00:00Z'))).expiredObjects).to.equal(2);
      expect(await keys(bucket)).to.deep.equal(['kept']);
    });

    it('aborts multipart uploads a rule has expired, parts and all, and leaves the others', async () => {
      const bucket = await newBucket();
      const initiate = async (key: string) => {
        const res = await layer.dpFetch('POST', `/internal/multipart/${bucket}/${enc(key)}`, JSON.stringify({ owner }), { 'content-type': 'application/json' });
        expect(res.status).to.equal(200);
        return ((await res.json()) as { uploadId: string }).uploadId;
      };
      const stale = await initiate('tmp/big.bin');
      const other = await initiate('data/big.bin');
      const part = await layer.dpFetch('PUT', `/internal/multipart/${bucket}/${enc('tmp/big.bin')}/${stale}/parts/1`, 'part one', { 'content-length': '8' });
      expect(part.status, await part.clone().text()).to.equal(200);
      const before = await layer.files();
      await setRules(bucket, [rule('uploads', { prefix: 'tmp/', abortIncompleteMultipartUploadDays: 2 })]);

      const initiated = Date.now(); // the data plane's clock stamped the uploads
      expect((await purge(new Date(initiated + DAY))).abortedUploads).to.equal(0);
      expect((await purge(new Date(initiated + 3 * DAY))).abortedUploads).to.equal(1);
      const listed = (await (await layer.dpFetch('GET', `/internal/multipart/${bucket}`)).json()) as { uploads: Array<{ uploadId: string }> };
      expect(listed.uploads.map((u) => u.uploadId)).to.deep.equal([other]);
      expect((await layer.dpFetch('GET', `/internal/multipart/${bucket}/${enc('tmp/big.bin')}/${stale}/parts`)).status).to.equal(404);
      const after = await layer.files();
      expect(after.length, 'the part file is removed').to.equal(before.length - 1);
      // Counted for Prometheus (the dashboard's lifecycle panel).
      const metrics = await (await fetch(`${layer.cp.url}/metrics`)).text();
      expect(metrics).to.match(/^strata_lifecycle_actions_total\{[^}]*action="abort"[^}]*\} 1$/m);
      expect(metrics).to.match(/^strata_lifecycle_actions_total\{[^}]*action="expire"[^}]*\} [1-9]\d*$/m);
    });
  });
}
