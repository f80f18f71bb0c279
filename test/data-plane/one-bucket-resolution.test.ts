import { expect } from 'chai';
import { DEFAULT_BUCKET_NAME_HOLD_MS } from '../../images/control-plane/src/app.js';
import { startObjectLayer, type ObjectLayer } from './harness.js';

/**
 * One resolution per request (hack/adr/0007-bucket-resolution.md): with the record the gateway authorised
 * (x-strata-bucket), neither plane looks the bucket's name up again, for every call about a bucket; and a
 * record gone stale (its bucket deleted, the name another account's bucket now) reaches nothing of the new bucket.
 */
describe('one bucket resolution per request: the record travels to every data-plane and control-plane call', function () {
  this.timeout(60_000);
  let layer: ObjectLayer;
  const statements: string[] = [];
  /** Statements that resolve a bucket by its name (the data plane's catalog, the control plane's store). */
  const nameLookups = () => statements.filter((s) => /FROM buckets WHERE name = \$1/.test(s)).length;
  /** Statements that look a bucket's row up by id (the data plane's catalog, for a non-fs record or a miss; the control plane's check after a miss). */
  const idLookups = () => statements.filter((s) => /^SELECT (id, name, owner, backend, encryption|1) FROM buckets WHERE id = \$1$/.test(s)).length;
  let seq = 0;

  before(async () => {
    layer = await startObjectLayer('postgres', { onStatement: (text) => statements.push(text) });
  });
  after(async () => {
    await layer?.stop();
  });

  const json = { 'content-type': 'application/json' };
  const newBucket = async (owner = 'alice') => {
    const name = `seam-${++seq}`;
    expect((await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner })).status).to.equal(200);
    return name;
  };
  /** The bucket's record as the gateway resolves it (GET /internal/buckets/:name), as x-strata-bucket. */
  const recordOf = async (bucket: string) => {
    const { id, name, owner, backend } = (await (await layer.cpFetch('GET', `/internal/buckets/${bucket}`)).json()) as Record<string, unknown>;
    return { 'x-strata-bucket': JSON.stringify({ id, name, owner, backend }) };
  };
  const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error?: { code: string } }).error?.code });
  const put = (bucket: string, key: string, body: string, headers: Record<string, string>) =>
    layer.dpFetch('PUT', `/internal/objects/${bucket}/${key}`, body, { 'x-strata-owner': 'alice', ...headers });
  const cp = (method: string, path: string, record: Record<string, string>, body?: unknown) => layer.cpFetch(method, path, body, record);
  const dp = (method: string, path: string, record: Record<string, string>, body?: unknown) =>
    layer.dpFetch(method, path, body === undefined ? undefined : JSON.stringify(body), { ...json, ...record });

  /** Every bucket-scoped call but PUT/GET/HEAD/copy/create/part (whose records other tests check), each answered as it should be. */
  async function everyCall(bucket: string, record: Record<string, string>): Promise<void> {
    const ok = async (res: Response | Promise<Response>, status = 200) => {
      const r = await res;
      expect(r.status, `${r.url}: ${await r.clone().text()}`).to.equal(status);
      return r;
    };
    // Control plane: listings, metadata, tags, ACLs, deletes, configurations.
    await ok(cp('GET', `/internal/buckets/${bucket}/objects?prefix=`, record));
    await ok(cp('GET', `/internal/buckets/${bucket}/objects/k`, record));
    await ok(cp('GET', `/internal/buckets/${bucket}/objects/k/parts`, record));
    await ok(cp('PUT', `/internal/buckets/${bucket}/objects/k/tagging`, record, { tags: [{ key: 'team', value: 'a' }] }), 204);
    await ok(cp('PUT', `/internal/buckets/${bucket}/objects/k/acl`, record, { acl: null }), 204);
    await ok(cp('PUT', `/internal/buckets/${bucket}/tags`, record, { rules: [{ key: 'team', value: 'a' }] }), 204);
    await ok(cp('GET', `/internal/buckets/${bucket}/tags`, record));
    await ok(cp('DELETE', `/internal/buckets/${bucket}/tags`, record), 204);
    // Data plane: a multipart upload's listing, parts, completion (conditional), abort; the bucket's uploads; their expiry.
    const { uploadId } = (await (await ok(dp('POST', `/internal/multipart/${bucket}/big`, record, { owner: 'alice' }))).json()) as { uploadId: string };
    const { etag } = (await (await ok(layer.dpFetch('PUT', `/internal/multipart/${bucket}/big/${uploadId}/parts/1`, 'part one', record))).json()) as {
      etag: string;
    };
    await ok(dp('GET', `/internal/multipart/${bucket}/big/${uploadId}/parts`, record));
    await ok(dp('GET', `/internal/multipart/${bucket}?prefix=b`, record));
    const complete = { parts: [{ partNumber: 1, etag }], conditions: { ifNoneMatch: '*' } };
    await ok(dp('POST', `/internal/multipart/${bucket}/big/${uploadId}/complete`, record, complete));
    await ok(dp('POST', `/internal/multipart/${bucket}/big/${uploadId}/complete`, record, complete)); // a retry: the first one's answer
    const second = (await (await ok(dp('POST', `/internal/multipart/${bucket}/other`, record, { owner: 'alice' }))).json()) as { uploadId: string };
    await ok(dp('DELETE', `/internal/multipart/${bucket}/other/${second.uploadId}`, record), 204);
    await ok(dp('POST', `/internal/multipart-expiry/${bucket}`, record, { prefix: '', initiatedNoLaterThan: new Date().toISOString() }));
    // Deletes, then the bucket itself.
    await ok(cp('POST', `/internal/buckets/${bucket}/delete-objects`, record, { objects: [{ key: 'big' }] }));
    await ok(cp('DELETE', `/internal/buckets/${bucket}/objects/k`, record), 204);
    await ok(cp('DELETE', `/internal/buckets/${bucket}`, record), 204);
  }

  it('with the record, no call looks the bucket up by its name in either plane (without it, each does)', async () => {
    for (const withRecord of [true, false]) {
      const bucket = await newBucket();
      const record = await recordOf(bucket);
      expect((await put(bucket, 'k', 'body', record)).status).to.equal(200);
      statements.length = 0;
      await everyCall(bucket, withRecord ? record : {});
      if (withRecord) {
        expect(
          statements.filter((s) => /FROM buckets WHERE name = \$1/.test(s)),
          'lookups by name',
        ).to.deep.equal([]);
        // An fs bucket's record is complete: the data plane reads no row for it either. The one read by id is
        // the conditional Complete's finding no object there yet (a miss: is the record's bucket still there?).
        expect(idLookups(), 'lookups by id').to.equal(1);
      } else {
        expect(nameLookups(), 'lookups by name without the record').to.be.greaterThan(15);
      }
    }
  });

  it('a stale record (bucket deleted, the name created again by another account) answers NoSuchBucket or nothing, and changes nothing of the new bucket', async () => {
    const bucket = await newBucket('alice');
    const stale = await recordOf(bucket);
    expect((await layer.cpFetch('DELETE', `/internal/buckets/${bucket}`)).status).to.equal(204);
    layer.clock.now = new Date(layer.clock.now.getTime() + DEFAULT_BUCKET_NAME_HOLD_MS + 1000); // past the name hold
    expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'bob' })).status).to.equal(200);
    const current = await recordOf(bucket);
    expect((await put(bucket, 'k', 'bob only', { ...current, 'x-strata-owner': 'bob' })).status).to.equal(200);
    const { uploadId } = (await (await dp('POST', `/internal/multipart/${bucket}/big`, current, { owner: 'bob' })).json()) as { uploadId: string };
    const noSuchBucket = { status: 404, code: 'NoSuchBucket' };

    expect(await errorOf(await cp('GET', `/internal/buckets/${bucket}/objects`, stale))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('GET', `/internal/buckets/${bucket}/objects/k`, stale))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('GET', `/internal/buckets/${bucket}/objects/k/parts`, stale))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('PUT', `/internal/buckets/${bucket}/objects/k/tagging`, stale, { tags: [{ key: 'x', value: 'y' }] }))).to.deep.equal(
      noSuchBucket,
    );
    expect(await errorOf(await cp('PUT', `/internal/buckets/${bucket}/objects/k/acl`, stale, { acl: null }))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('PUT', `/internal/buckets/${bucket}/tags`, stale, { rules: [{ key: 'x', value: 'y' }] }))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('GET', `/internal/buckets/${bucket}/tags`, stale))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('DELETE', `/internal/buckets/${bucket}/objects/k`, stale))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('DELETE', `/internal/buckets/${bucket}/objects/k?ifMatch=*`, stale))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('POST', `/internal/buckets/${bucket}/delete-objects`, stale, { objects: [{ key: 'k' }] }))).to.deep.equal(noSuchBucket);
    expect(await errorOf(await cp('DELETE', `/internal/buckets/${bucket}`, stale))).to.deep.equal(noSuchBucket);
    // Bob's upload is not another bucket's to list, complete or abort; the old bucket had no uploads left.
    const noSuchUpload = { status: 404, code: 'NoSuchUpload' };
    expect(await errorOf(await dp('GET', `/internal/multipart/${bucket}/big/${uploadId}/parts`, stale))).to.deep.equal(noSuchUpload);
    expect(await errorOf(await dp('POST', `/internal/multipart/${bucket}/big/${uploadId}/complete`, stale, { parts: [] }))).to.deep.equal(noSuchUpload);
    expect(await errorOf(await dp('DELETE', `/internal/multipart/${bucket}/big/${uploadId}`, stale))).to.deep.equal(noSuchUpload);
    expect(((await (await dp('GET', `/internal/multipart/${bucket}`, stale)).json()) as { uploads: unknown[] }).uploads).to.deep.equal([]);
    const expiry = { prefix: '', initiatedNoLaterThan: new Date(Date.now() + 3_600_000).toISOString() };
    expect(await (await dp('POST', `/internal/multipart-expiry/${bucket}`, stale, expiry)).json()).to.deep.equal({ aborted: 0 });

    // The new bucket is as bob left it.
    const meta = (await (await cp('GET', `/internal/buckets/${bucket}/objects/k`, current)).json()) as { tags?: unknown; owner?: string };
    expect(meta.tags).to.equal(undefined);
    expect(await (await layer.dpFetch('GET', `/internal/objects/${bucket}/k`, undefined, current)).text()).to.equal('bob only');
    expect(await errorOf(await cp('GET', `/internal/buckets/${bucket}/tags`, current))).to.deep.equal({ status: 404, code: 'NoSuchTagSet' });
    const uploads = (await (await dp('GET', `/internal/multipart/${bucket}`, current)).json()) as { uploads: Array<{ uploadId: string }> };
    expect(uploads.uploads.map((u) => u.uploadId)).to.deep.equal([uploadId]);
  });

  it('a record must name the bucket of the path (InvalidArgument), in the control plane as in the data plane', async () => {
    const bucket = await newBucket();
    const other = await newBucket();
    const record = await recordOf(other);
    expect(await errorOf(await cp('GET', `/internal/buckets/${bucket}/objects`, record))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
    expect(await errorOf(await cp('DELETE', `/internal/buckets/${bucket}`, record))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
    expect(await errorOf(await dp('GET', `/internal/multipart/${bucket}`, record))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
    expect((await layer.cpFetch('GET', `/internal/buckets/${bucket}`)).status).to.equal(200);
  });
});
