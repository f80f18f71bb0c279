import { expect } from 'chai';
import { BucketReconciler, BUCKET_FINALIZER } from '../../controllers/bucket/bucket-reconciler.js';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import type { Bucket } from '../../controllers/api/index.js';
import { eventReasons, eventually, markStackReady, mustGet, startHarness, stored, TEST_SETTINGS, type Harness } from './support/harness.js';
import { RecordingControlPlane } from './support/recording-control-plane.js';

const bucketCr = (ns: string, name: string) => ({
  apiVersion: 'strata.dev/v1alpha1',
  kind: 'Bucket',
  metadata: { name, namespace: ns },
  spec: { deletionPolicy: 'Delete' },
});
const getBucket = (h: Harness, ns: string, name: string) => stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', ns, name) as unknown as Bucket | undefined;

/** Deletion of a Delete-policy Bucket always finishes, also when its stack cannot come back. */
describe('Bucket deletion when the stack is gone', () => {
  let h: Harness;
  let cp: RecordingControlPlane | undefined;

  /** A Ready Delete-policy Bucket in `ns`, served by a recording control plane. */
  async function readyBucket(ns: string, deadlineSeconds: number) {
    h.start([
      new BucketReconciler(
        h.kube,
        h.events,
        { ...TEST_SETTINGS, stackDeletionDeadlineSeconds: deadlineSeconds },
        (access) => new HttpBucketService({ ...access, controlPlaneUrl: cp!.url }),
      ),
    ]);
    await h.kube.apply(bucketCr(ns, 'photos') as never);
    const internal = await eventually(() => mustGet(h.fake, 'v1', 'Secret', ns, 'strata-internal'), 'stack secrets');
    cp = await new RecordingControlPlane(secretValue(internal as never, 'STRATA_INTERNAL_TOKEN')!).start();
    await markStackReady(h.fake, ns);
    await eventually(() => expect(getBucket(h, ns, 'photos')!.status?.objectCount).to.equal(0), 'bucket ready');
    expect(getBucket(h, ns, 'photos')!.metadata.finalizers).to.include(BUCKET_FINALIZER);
  }

  beforeEach(async () => {
    cp = undefined;
    h = await startHarness();
  });
  afterEach(async () => {
    await h.stop();
    await cp?.stop();
  });

  it('releases the Bucket of a terminating namespace, and the namespace goes', async () => {
    await h.kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'doomed' } } as never);
    await readyBucket('doomed', 3600);
    await h.kube.delete({ apiVersion: 'v1', kind: 'Namespace', namespace: '', name: 'doomed' });
    // The namespace controller deletes the stack with everything else; the Bucket must not hold it.
    await eventually(() => expect(stored(h.fake, 'v1', 'Namespace', '', 'doomed')).to.equal(undefined), 'namespace gone', 15_000);
    expect(cp!.buckets.has('photos')).to.equal(true);
  });

  it('releases the Bucket with a Warning once the stack has been down past the deadline', async () => {
    await readyBucket('store', 1);
    const t = h.fake.state.typeForKind('apps/v1', 'Deployment');
    h.fake.state.update(t, 'store', 'strata-gateway', { ...h.fake.state.get(t, 'store', 'strata-gateway'), status: { readyReplicas: 0 } }, 'status');
    // The Bucket reports the stack down first; its finalizer records that its bucket was made.
    await eventually(
      () => expect(getBucket(h, 'store', 'photos')!.status?.conditions?.find((c) => c.type === 'Progressing')?.status).to.equal('True'),
      'stack down',
    );
    await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: 'store', name: 'photos' });
    await eventually(() => expect(getBucket(h, 'store', 'photos')).to.equal(undefined), 'released', 15_000);
    const events = h.fake.state.list(h.fake.state.typeForKind('v1', 'Event'), 'store').filter((e) => e.reason === 'BucketNotDeleted');
    expect(events).to.have.length(1);
    expect(events[0]!.type).to.equal('Warning');
    expect(eventReasons(h.fake, 'store', 'photos')).to.not.include('BucketDeleted');
  });
});
