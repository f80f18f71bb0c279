import { expect } from 'chai';
import { BOUND_ANNOTATIONS, BUCKET_FINALIZER, BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import type { Bucket } from '../../controllers/api/index.js';
import type { KubeClient, ObjectRef } from '../../controllers/support/kube-client.js';
import { eventually, loadCrds, markStackReady, mustGet, startHarness, stored, TEST_SETTINGS, type Harness } from './support/harness.js';
import { RecordingControlPlane } from './support/recording-control-plane.js';

const NS = 'store';
const BUCKET = { apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'photos' };
const getBucket = (h: Harness) => stored(h.fake, BUCKET.apiVersion, BUCKET.kind, NS, 'photos') as unknown as Bucket;
const condition = (h: Harness, type: string) => getBucket(h).status?.conditions?.find((c) => c.type === type);

describe('Bucket: the bucket name and backend it was made with', () => {
  let h: Harness;
  let cp: RecordingControlPlane | undefined;

  /** The operator on `kube`; the Bucket photos applied and its stack made ready. */
  async function bucketReady(kube: KubeClient, spec: object): Promise<void> {
    h.start([new BucketReconciler(kube, h.events, TEST_SETTINGS, (access) => new HttpBucketService({ ...access, controlPlaneUrl: cp!.url }))]);
    await h.kube.apply({ apiVersion: BUCKET.apiVersion, kind: BUCKET.kind, metadata: { name: 'photos', namespace: NS }, spec } as never);
    const secret = await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
    cp = await new RecordingControlPlane(secretValue(secret as never, 'STRATA_INTERNAL_TOKEN')!).start();
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-gateway'), 'stack created');
    await markStackReady(h.fake, NS);
    await eventually(() => expect(condition(h, 'Ready')?.status).to.equal('True'), 'bucket ready');
  }

  beforeEach(async () => {
    cp = undefined;
    h = await startHarness();
  });
  afterEach(async () => {
    await h.stop();
    await cp?.stop();
  });

  it('the CRD refuses edits of spec.bucketName and spec.backend (CEL transition rules)', () => {
    const crd = loadCrds().find((c) => (c as { metadata: { name: string } }).metadata.name === 'buckets.strata.dev') as {
      spec: {
        versions: Array<{
          schema: { openAPIV3Schema: { properties: { spec: Record<string, unknown> & { properties: Record<string, Record<string, unknown>> } } } };
        }>;
      };
    };
    const spec = crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec;
    for (const field of ['bucketName', 'backend']) {
      expect(spec.properties[field]!['x-kubernetes-validations'], field).to.deep.include({
        rule: 'self == oldSelf',
        message: `spec.${field} cannot be changed: ${field === 'backend' ? 'the bytes stay where the bucket was created' : 'a new name would leave the old bucket behind'}`,
      });
    }
    expect(spec['x-kubernetes-validations']).to.deep.include({
      rule: 'has(self.bucketName) == has(oldSelf.bucketName)',
      message: 'spec.bucketName cannot be set or removed after creation',
    });
  });

  it('refuses a renamed or re-homed bucket with a condition, never acting on the new values, and deletes the bucket it made', async () => {
    await bucketReady(h.kube, { deletionPolicy: 'Delete' });
    expect(getBucket(h).metadata.annotations?.[BOUND_ANNOTATIONS.bucketName]).to.equal('photos');

    // The API server refuses the edits...
    for (const [spec, message] of [
      [{ bucketName: 'renamed' }, 'spec.bucketName cannot be set or removed after creation'],
      [{ backend: { kind: 'minio', endpoint: 'http://minio:9000' } }, 'spec.backend cannot be changed'],
    ] as const) {
      const refused = await h.kube.mergePatch(BUCKET, { spec }).catch((e: unknown) => e);
      expect(String((refused as { body?: unknown }).body ?? refused)).to.contain(message);
    }
    // ...and where it lets them through (a CRD from before the rules), the operator refuses them.
    h.fake.state.celTransitionRules = false;
    await h.kube.mergePatch(BUCKET, { spec: { bucketName: 'renamed' } });
    await eventually(() => {
      expect(condition(h, 'Ready')).to.include({ status: 'False', reason: 'ImmutableFieldChanged' });
      expect(condition(h, 'Ready')?.message).to.contain('spec.bucketName cannot be changed: this resource manages bucket photos');
    }, 'rename refused');
    expect(getBucket(h).status?.bucketName).to.equal('photos');

    await h.kube.mergePatch(BUCKET, { spec: { bucketName: null, backend: { kind: 'minio', endpoint: 'http://minio:9000' } } });
    await eventually(() => expect(condition(h, 'Ready')?.message).to.contain('spec.backend cannot be changed'), 'new backend refused');

    await h.kube.delete(BUCKET);
    await eventually(() => expect(stored(h.fake, BUCKET.apiVersion, BUCKET.kind, NS, 'photos')).to.equal(undefined), 'resource gone');
    expect(new Set(cp!.calls.filter((c) => c.method === 'PUT').map((c) => c.path))).to.deep.equal(new Set(['/internal/buckets/photos']));
    expect(cp!.buckets.has('photos'), 'the bucket it made, deleted').to.equal(false);
  });

  it('adds its finalizer without removing one added concurrently', async () => {
    let interfered = false;
    // Another controller adds its finalizer between the operator's read and its patch.
    const kube = new Proxy(h.kube, {
      get(target, prop) {
        if (prop === 'mergePatch')
          return async (ref: ObjectRef, patch: { metadata?: { finalizers?: string[] } }) => {
            if (!interfered && patch.metadata?.finalizers) {
              interfered = true;
              await h.kube.mergePatch(ref, { metadata: { finalizers: [...(getBucket(h).metadata.finalizers ?? []), 'example.com/keep'] } });
            }
            return target.mergePatch(ref, patch);
          };
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    await bucketReady(kube, {});
    expect(interfered).to.equal(true);
    expect(getBucket(h).metadata.finalizers).to.have.members(['example.com/keep', BUCKET_FINALIZER]);
  });
});
