import { expect } from 'chai';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import type { Bucket } from '../../controllers/api/index.js';
import { eventually, harnessHooks, markStackReady, mustGet, stored, TEST_SETTINGS } from './support/harness.js';
import { RecordingControlPlane } from './support/recording-control-plane.js';

const NS = 'media';
const bucketCr = (name: string, spec: object = {}) => ({
  apiVersion: 'strata.dev/v1alpha1',
  kind: 'Bucket',
  metadata: { name, namespace: NS },
  spec: { deletionPolicy: 'Delete', ...spec },
});
const BIG = 40_000; // 40 chunks of 1 000 keys

/** Emptying a Delete-policy bucket takes one chunk per reconcile, so that no worker is held by it. */
describe('Bucket deletion in bounded chunks', function () {
  this.timeout(120_000);
  let cp: RecordingControlPlane | undefined;
  const h = harnessHooks('each', (h) => {
    h.start([new BucketReconciler(h.cached, h.events, TEST_SETTINGS, (access) => new HttpBucketService({ ...access, controlPlaneUrl: cp!.url }))]);
  });
  afterEach(async () => {
    await cp?.stop();
    cp = undefined;
  });
  const getBucket = (name: string) => stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', NS, name) as unknown as Bucket | undefined;

  it('empties two big buckets chunk by chunk while a third Bucket is reconciled meanwhile, with the objects left in status', async () => {
    for (const name of ['big-a', 'big-b', 'small']) await h.kube.apply(bucketCr(name) as never);
    const internal = await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
    cp = await new RecordingControlPlane(secretValue(internal as never, 'STRATA_INTERNAL_TOKEN')!).start();
    await markStackReady(h.fake, NS);
    for (const name of ['big-a', 'big-b', 'small']) {
      await eventually(() => expect(getBucket(name)?.status?.objectCount).to.equal(0), `${name} ready`, 20_000);
    }
    for (const name of ['big-a', 'big-b']) cp.buckets.get(name)!.objects.push(...Array.from({ length: BIG }, (_, i) => `k${i}`));

    for (const name of ['big-a', 'big-b']) await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name });
    // Both workers are busy with the two deletions; the third Bucket's change must still be served.
    await eventually(() => expect(cp!.calls.some((c) => c.path === '/internal/buckets/big-b/delete-objects')).to.equal(true), 'both emptying');
    await h.kube.apply(bucketCr('small', { cors: { rules: [{ allowedOrigins: ['https://a.example'], allowedMethods: ['GET'] }] } }) as never);
    await eventually(() => expect(cp!.buckets.get('small')?.cors).to.have.length(1), 'third Bucket reconciled');
    const corsAt = cp.calls.findIndex((c) => c.method === 'PUT' && c.path === '/internal/buckets/small/cors');
    const before = cp.calls.slice(0, corsAt);
    // Neither big bucket was done when it was (both had chunks deleted, neither was deleted): it waited for neither.
    for (const name of ['big-a', 'big-b']) {
      expect(
        before.some((c) => c.path === `/internal/buckets/${name}/delete-objects`),
        `${name} emptying`,
      ).to.equal(true);
      expect(
        before.some((c) => c.method === 'DELETE' && c.path === `/internal/buckets/${name}`),
        `${name} deleted`,
      ).to.equal(false);
    }

    // Status shows the progress while the Bucket is being deleted.
    await eventually(() => {
      const b = getBucket('big-a');
      expect(b?.status?.conditions?.find((c) => c.type === 'Progressing')?.reason).to.equal('EmptyingBucket');
      expect(b?.status?.objectCount).to.be.within(1, BIG - 1);
    }, 'progress in status');

    for (const name of ['big-a', 'big-b']) await eventually(() => expect(getBucket(name)).to.equal(undefined), `${name} released`, 60_000);
    expect(cp.buckets.has('big-a')).to.equal(false);
    expect(cp.buckets.has('big-b')).to.equal(false);
    // Each delete-objects call carried at most one chunk.
    const batches = cp.calls.filter((c) => c.path.endsWith('/delete-objects')).map((c) => (c.body as { keys: string[] }).keys.length);
    expect(Math.max(...batches)).to.equal(1000);
    expect(batches).to.have.length(2 * (BIG / 1000));
  });
});
