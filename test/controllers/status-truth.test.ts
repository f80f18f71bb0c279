import { expect } from 'chai';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { renderRedisCluster } from '../../controllers/bucket/render-redis-cluster.js';
import { ImageIndexReconciler } from '../../controllers/image-index/image-index-reconciler.js';
import type { IndexWorkerClient } from '../../controllers/image-index/index-worker-client.js';
import type { Condition } from '../../controllers/api/index.js';
import { eventually, markDeploymentReady, mustGet, harnessHooks, setJobStatus, stored, TEST_SETTINGS, type Doc, type Harness } from './support/harness.js';

const NS = 'truth';
const worker: IndexWorkerClient = { status: async () => ({ vectors: 0, bufferSize: 0 }) };
const conditionOf = (h: Harness, kind: string, name: string, type: string) =>
  ((stored(h.fake, 'strata.dev/v1alpha1', kind, NS, name) as Doc | undefined)?.status?.conditions as Condition[] | undefined)?.find((c) => c.type === type);
const indexCr = (storage: object) => ({
  apiVersion: 'strata.dev/v1alpha1',
  kind: 'ImageIndex',
  metadata: { name: 'photos', namespace: NS },
  spec: { source: { directory: '/images' }, model: { directory: '/models' }, storage },
});

/** Status tells what the API server said, and nothing is re-applied that the API server must refuse. */
describe('status that tells the truth', () => {
  const h = harnessHooks('each');

  it('reports an apply the API server refuses as Degraded, with its message', async () => {
    // A worker Deployment already there with another selector: the selector is immutable.
    await h.kube.apply({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'photos-index-worker', namespace: NS },
      spec: {
        selector: { matchLabels: { other: 'x' } },
        template: { metadata: { labels: { other: 'x' } }, spec: { containers: [{ name: 'x', image: 'x' }] } },
      },
    } as never);
    h.start([new ImageIndexReconciler(h.kube, h.events, TEST_SETTINGS, worker)]);
    await h.kube.apply(indexCr({ size: '10Gi' }) as never);
    await eventually(() => {
      const degraded = conditionOf(h, 'ImageIndex', 'photos', 'Degraded');
      expect(degraded).to.include({ status: 'True', reason: 'ApplyFailed' });
      expect(degraded!.message).to.match(/immutable/);
    }, 'degraded with the message');
  });

  it('grows a claim but never shrinks it, and keeps its storage class once set', async () => {
    h.start([new ImageIndexReconciler(h.kube, h.events, TEST_SETTINGS, worker)]);
    await h.kube.apply(indexCr({ size: '10Gi', storageClassName: 'fast' }) as never);
    const claim = () => mustGet(h.fake, 'v1', 'PersistentVolumeClaim', NS, 'photos-index-state') as Doc;
    await eventually(() => expect(claim().spec.resources.requests.storage).to.equal('10Gi'), 'claim');
    await h.kube.apply(indexCr({ size: '5Gi', storageClassName: 'slow' }) as never);
    await eventually(() => expect(conditionOf(h, 'ImageIndex', 'photos', 'Progressing')?.observedGeneration).to.equal(2), 'new generation seen');
    expect(conditionOf(h, 'ImageIndex', 'photos', 'Degraded')?.status).to.equal('False');
    expect(claim().spec).to.deep.include({ storageClassName: 'fast' });
    expect(claim().spec.resources.requests.storage).to.equal('10Gi');
    await h.kube.apply(indexCr({ size: '20Gi', storageClassName: 'slow' }) as never);
    await eventually(() => expect(claim().spec.resources.requests.storage).to.equal('20Gi'), 'grown');
    expect(claim().spec.storageClassName).to.equal('fast');
  });

  it('turns a Bucket whose stack never becomes ready Degraded after the progress deadline', async () => {
    h.start([new BucketReconciler(h.kube, h.events, { ...TEST_SETTINGS, progressDeadlineSeconds: 1 })]);
    await h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'photos', namespace: NS }, spec: {} } as never);
    await eventually(() => expect(conditionOf(h, 'Bucket', 'photos', 'Progressing')?.status).to.equal('True'), 'progressing');
    await eventually(() => expect(conditionOf(h, 'Bucket', 'photos', 'Degraded')).to.include({ status: 'True', reason: 'StackNotReady' }), 'degraded', 20_000);
  });

  it('names auto-merge Jobs by the worker state they merge, so a lost status never blocks the next merge', async () => {
    const state = { vectors: 5000, bufferSize: 1500 };
    const stub: IndexWorkerClient = { status: async () => state };
    h.start([new ImageIndexReconciler(h.kube, h.events, TEST_SETTINGS, stub)]);
    await h.kube.apply({ ...indexCr({ size: '10Gi' }), spec: { ...indexCr({ size: '10Gi' }).spec, bufferThreshold: 1000 } } as never);
    const jobs = () => h.fake.state.list(h.fake.state.typeForKind('batch/v1', 'Job'), NS);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker'), 'worker');
    markDeploymentReady(h.fake, NS, 'photos-index-worker');
    const first = await eventually(() => {
      expect(jobs()).to.have.length(1);
      return jobs()[0]!;
    }, 'first merge');
    // The merge empties the buffer and its Job completes.
    Object.assign(state, { vectors: 5000, bufferSize: 0 });
    setJobStatus(h.fake, NS, first.metadata.name, { succeeded: 1, conditions: [{ type: 'Complete', status: 'True' }] });
    await eventually(() => expect((stored(h.fake, 'strata.dev/v1alpha1', 'ImageIndex', NS, 'photos') as Doc).status.bufferSize).to.equal(0), 'merged');
    expect(jobs()).to.have.length(1);
    // The status is lost (restored from a backup, rewritten by hand): the counter it kept is gone.
    const it = h.fake.state.typeForKind('strata.dev/v1alpha1', 'ImageIndex');
    h.fake.state.update(it, NS, 'photos', { ...h.fake.state.get(it, NS, 'photos'), status: {} }, 'status');
    Object.assign(state, { vectors: 6500, bufferSize: 1200 });
    await eventually(() => expect(jobs()).to.have.length(2), 'the next merge runs', 15_000);
  });

  it('names the Redis cluster Job by its pod template, which the API server never lets change', () => {
    const job = (ns: string) => renderRedisCluster(ns, [], { thirdPartyRegistry: '' }).find((o) => o.kind === 'Job')!;
    expect(job('a').metadata.name).to.equal(job('a').metadata.name);
    expect(job('a').metadata.name).to.not.equal(job('b').metadata.name);
  });
});
