import { expect } from 'chai';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { ImageIndexReconciler } from '../../controllers/image-index/image-index-reconciler.js';
import type { IndexWorkerClient } from '../../controllers/image-index/index-worker-client.js';
import type { FakeKubeServer } from '../support/fake-kube/index.js';
import { eventReasons, eventually, markDeploymentReady, mustGet, setJobStatus, stored, TEST_SETTINGS, type Doc, type Harness } from './support/harness.js';
import { bringUpStack, useStackFixture } from './support/stack-fixture.js';

const NS = 'memory';
const GROUP_VERSION = 'strata.dev/v1alpha1';

/** Lose a resource's status, as a status write that never arrived (or a restore from a backup) would. */
function loseStatus(fake: FakeKubeServer, kind: string, name: string): void {
  const t = fake.state.typeForKind(GROUP_VERSION, kind);
  fake.state.update(t, NS, name, { ...fake.state.get(t, NS, name), status: {} }, 'status');
}

const jobsOf = (h: Harness) => h.fake.state.list(h.fake.state.typeForKind('batch/v1', 'Job'), NS).filter((j) => j.metadata.labels?.['strata.dev/image-index']);
const poke = (h: Harness, kind: string, name: string, value: string) =>
  h.kube.mergePatch({ apiVersion: GROUP_VERSION, kind, namespace: NS, name }, { metadata: { annotations: { poke: value } } });

/** Status is rebuilt from the world on every reconcile; losing it changes no decision. */
describe('status is never the controllers\u2019 memory', () => {
  const fixture = useStackFixture();

  it('ImageIndex: the Jobs tell which requests ran, how they ended and when the last merge was; nothing runs or is reported twice', async () => {
    const { h } = fixture;
    const worker: IndexWorkerClient = { status: async () => ({ vectors: 10, bufferSize: 0 }) };
    h.start([new ImageIndexReconciler(h.cached, h.events, TEST_SETTINGS, worker)]);
    await h.kube.apply({
      apiVersion: GROUP_VERSION,
      kind: 'ImageIndex',
      metadata: { name: 'photos', namespace: NS },
      spec: { source: { directory: '/images' }, model: { directory: '/models' }, autoMerge: false, mergeRequest: 'm1' },
    } as never);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker'), 'worker');
    markDeploymentReady(h.fake, NS, 'photos-index-worker');
    const job = await eventually(() => {
      expect(jobsOf(h)).to.have.length(1);
      return jobsOf(h)[0]!;
    }, 'merge job');
    expect(job.metadata.annotations?.['strata.dev/index-request']).to.equal('m1');
    expect((job as Doc).spec.ttlSecondsAfterFinished).to.equal(undefined);
    await eventually(() => expect((stored(h.fake, GROUP_VERSION, 'ImageIndex', NS, 'photos') as Doc).status.activeJob).to.equal(job.metadata.name), 'running');

    // The status is lost while the Job runs; then the Job finishes.
    loseStatus(h.fake, 'ImageIndex', 'photos');
    setJobStatus(h.fake, NS, job.metadata.name, { succeeded: 1, completionTime: '2026-11-22T12:00:00Z', conditions: [{ type: 'Complete', status: 'True' }] });
    await eventually(() => {
      const status = (stored(h.fake, GROUP_VERSION, 'ImageIndex', NS, 'photos') as Doc).status;
      expect(status).to.include({ handledMergeRequest: 'm1', lastMergeTime: '2026-11-22T12:00:00Z', jobCount: 1 });
      expect(status.activeJob).to.equal(undefined);
    }, 'status rebuilt from the Job');
    await eventually(() => expect(eventReasons(h.fake, NS, 'photos').filter((r) => r === 'IndexOperationSucceeded')).to.have.length(1), 'reported');

    // Lost again: the same Jobs, the same status, and the outcome is not reported a second time.
    loseStatus(h.fake, 'ImageIndex', 'photos');
    await poke(h, 'ImageIndex', 'photos', '1');
    await eventually(
      () => expect((stored(h.fake, GROUP_VERSION, 'ImageIndex', NS, 'photos') as Doc).status).to.include({ handledMergeRequest: 'm1', jobCount: 1 }),
      'rebuilt again',
    );
    expect(jobsOf(h).map((j) => j.metadata.name)).to.deep.equal([job.metadata.name]);
    expect(eventReasons(h.fake, NS, 'photos').filter((r) => r === 'IndexOperationSucceeded')).to.have.length(1);
    expect(eventReasons(h.fake, NS, 'photos').filter((r) => r === 'MergeStarted')).to.have.length(1);
  });

  it('Bucket: a lost status does not make a Delete-policy Bucket whose bucket exists look never made', async () => {
    const { h } = fixture;
    h.start([new BucketReconciler(h.cached, h.events, TEST_SETTINGS, (access) => new HttpBucketService({ ...access, controlPlaneUrl: fixture.cp!.url }))]);
    await h.kube.apply({ apiVersion: GROUP_VERSION, kind: 'Bucket', metadata: { name: 'photos', namespace: NS }, spec: { deletionPolicy: 'Delete' } } as never);
    const cp = await bringUpStack(fixture, NS);
    await eventually(() => expect((stored(h.fake, GROUP_VERSION, 'Bucket', NS, 'photos') as Doc).status?.objectCount).to.equal(0), 'ready');
    cp.buckets.get('photos')!.objects.push('kept-until-deleted');

    // The gateway goes down and the status is lost; then the resource is deleted.
    const t = h.fake.state.typeForKind('apps/v1', 'Deployment');
    h.fake.state.update(t, NS, 'strata-gateway', { ...h.fake.state.get(t, NS, 'strata-gateway'), status: { readyReplicas: 0 } }, 'status');
    loseStatus(h.fake, 'Bucket', 'photos');
    await h.kube.delete({ apiVersion: GROUP_VERSION, kind: 'Bucket', namespace: NS, name: 'photos' });
    await eventually(() => expect((stored(h.fake, GROUP_VERSION, 'Bucket', NS, 'photos') as Doc).metadata.deletionTimestamp).to.be.a('string'), 'deleting');
    await poke(h, 'Bucket', 'photos', '1');
    // It waits for the stack (the bucket exists), and deletes the bucket once the stack is back.
    // (A reconcile that waits asks whether the namespace is terminating.)
    await eventually(
      () => expect(h.fake.requests.filter((r) => r === `GET /api/v1/namespaces/${NS}`).length).to.be.greaterThan(2),
      'reconciled while deleting',
    );
    expect(stored(h.fake, GROUP_VERSION, 'Bucket', NS, 'photos')).to.not.equal(undefined);
    expect(cp.buckets.has('photos')).to.equal(true);
    markDeploymentReady(h.fake, NS, 'strata-gateway');
    await eventually(() => expect(stored(h.fake, GROUP_VERSION, 'Bucket', NS, 'photos')).to.equal(undefined), 'released');
    expect(cp.buckets.has('photos')).to.equal(false);
    expect(eventReasons(h.fake, NS, 'photos')).to.include('BucketDeleted');
  });
});
