import { expect } from 'chai';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { ImageIndexReconciler } from '../../controllers/image-index/image-index-reconciler.js';
import { ModelServerReconciler } from '../../controllers/model-server/model-server-reconciler.js';
import type { Reconciler } from '../../controllers/support/reconciler.js';
import { APPLIED_HASH_ANNOTATION } from '../../operator/desired-state.js';
import { eventually, markDeploymentReady, mustGet, stored, TEST_SETTINGS, type Doc, type Harness } from '../controllers/support/harness.js';
import { bringUpStack, useStackFixture } from '../controllers/support/stack-fixture.js';

const NS = 'store';

/** The requests the fake API server receives while `fn` runs. */
async function requestsDuring(h: Harness, fn: () => Promise<unknown>): Promise<string[]> {
  const from = h.fake.requests.length;
  await fn();
  return h.fake.requests.slice(from);
}

/** Reconcile until one reconcile sends nothing (the cache has caught up with the last writes). */
async function settle(h: Harness, reconciler: Reconciler, name: string): Promise<void> {
  await eventually(
    async () => expect((await requestsDuring(h, () => reconciler.reconcile({ namespace: NS, name }))).join(' ')).to.equal('', 'requests'),
    'a reconcile that sends nothing',
  );
}

describe('shared informers and the cached client', () => {
  const fixture = useStackFixture();

  it('reconciles an unchanged Bucket without a single request to the API server, and re-applies only what drifted', async () => {
    const { h } = fixture;
    const bucket = new BucketReconciler(h.cached, h.events, TEST_SETTINGS, (access) => new HttpBucketService({ ...access, controlPlaneUrl: fixture.cp!.url }));
    h.start([bucket]);
    await h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'photos', namespace: NS }, spec: {} } as never);
    await bringUpStack(fixture, NS);
    await eventually(() => expect((stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', NS, 'photos') as Doc).status?.objectCount).to.equal(0), 'bucket ready');
    expect(mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-gateway').metadata.annotations?.[APPLIED_HASH_ANNOTATION]).to.match(/^[0-9a-f]{32}$/);

    await settle(h, bucket, 'photos');
    for (let i = 0; i < 5; i++) {
      expect(await requestsDuring(h, () => bucket.reconcile({ namespace: NS, name: 'photos' })), `reconcile ${i}`).to.deep.equal([]);
    }

    // An edit of a field the operator sets is drift: that one object is applied again, nothing else.
    await h.kube.mergePatch({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'strata-data-plane' }, { spec: { replicas: 0 } });
    await eventually(() => expect((mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-data-plane') as Doc).spec.replicas).to.equal(1), 'drift undone');
    // A lost annotation is drift as well.
    const writes = await requestsDuring(h, async () => {
      await h.kube.mergePatch(
        { apiVersion: 'v1', kind: 'Service', namespace: NS, name: 'strata-gateway' },
        { metadata: { annotations: { [APPLIED_HASH_ANNOTATION]: null } } },
      );
      await eventually(
        () => expect(mustGet(h.fake, 'v1', 'Service', NS, 'strata-gateway').metadata.annotations?.[APPLIED_HASH_ANNOTATION]).to.be.a('string'),
        'annotation restored',
      );
      await settle(h, bucket, 'photos');
    });
    // The test's own patch, then the operator's apply of that one object (the test's direct reconciles
    // may race the manager's before the cache has caught up: the same apply, sent again).
    expect(new Set(writes.filter((r) => !r.startsWith('GET')))).to.deep.equal(new Set([`PATCH /api/v1/namespaces/${NS}/services/strata-gateway`]));
  });

  it('applies exactly the objects whose configuration a spec change alters', async () => {
    const { h } = fixture;
    const ms = new ModelServerReconciler(h.cached, h.events, TEST_SETTINGS);
    h.start([ms]);
    const modelServer = (replicas: number) => ({
      apiVersion: 'strata.dev/v1alpha1',
      kind: 'ModelServer',
      metadata: { name: 'tiny', namespace: NS },
      spec: { replicas },
    });
    await h.kube.apply(modelServer(1) as never);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server'), 'deployment');
    markDeploymentReady(h.fake, NS, 'tiny-model-server');
    await eventually(() => expect((stored(h.fake, 'strata.dev/v1alpha1', 'ModelServer', NS, 'tiny') as Doc).status?.readyReplicas).to.equal(1), 'ready');
    await settle(h, ms, 'tiny');

    const changed = await requestsDuring(h, async () => {
      await h.kube.apply(modelServer(2) as never);
      await eventually(() => expect((mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server') as Doc).spec.replicas).to.equal(2), 'scaled');
      await settle(h, ms, 'tiny');
    });
    // The test's apply of the ModelServer, then the operator's apply of the Deployment alone (not the Service).
    const applies = new Set(changed.filter((r) => r.startsWith('PATCH') && !r.endsWith('/status')));
    expect(applies).to.deep.equal(
      new Set([`PATCH /apis/strata.dev/v1alpha1/namespaces/${NS}/modelservers/tiny`, `PATCH /apis/apps/v1/namespaces/${NS}/deployments/tiny-model-server`]),
    );
  });

  it('lists and watches each kind once for every controller that needs it', async () => {
    const { h } = fixture;
    const manager = h.start([
      new BucketReconciler(h.cached, h.events, TEST_SETTINGS),
      new ImageIndexReconciler(h.cached, h.events, TEST_SETTINGS),
      new ModelServerReconciler(h.cached, h.events, TEST_SETTINGS),
    ]);
    await eventually(() => expect(manager.isReady).to.equal(true), 'informers synced');
    // One list and one watch of Deployments and of Services, which all three controllers own.
    for (const path of ['/apis/apps/v1/deployments', '/api/v1/services']) {
      expect(
        h.fake.requests.filter((r) => r === `GET ${path}`),
        path,
      ).to.have.length(2);
    }
  });
});
