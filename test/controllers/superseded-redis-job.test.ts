import { expect } from 'chai';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { eventually, harnessHooks, TEST_SETTINGS, type Harness } from './support/harness.js';

const NS = 'cache';
const redisJobs = (h: Harness) =>
  h.fake.state
    .list(h.fake.state.typeForKind('batch/v1', 'Job'), NS)
    .map((j) => j.metadata.name)
    .filter((n) => n.startsWith('strata-redis-cluster-create-'));

/** A Redis cluster-create Job of an older template (an operator upgrade changed it) is deleted, not left behind. */
describe('superseded Redis cluster-create Jobs', () => {
  const h = harnessHooks('each', (h) => h.start([new BucketReconciler(h.kube, h.events, TEST_SETTINGS)]));

  it('deletes the Job of an older template once the current one is applied, and leaves other Jobs alone', async () => {
    const labels = { 'app.kubernetes.io/managed-by': 'strata-operator', 'app.kubernetes.io/name': 'redis' };
    const job = (name: string) => ({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name, namespace: NS, labels },
      spec: {
        template: {
          spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'redis:7.0', command: ['true'] }] },
        },
      },
    });
    await h.kube.apply(job('strata-redis-cluster-create-0000000000') as never);
    await h.kube.apply(job('strata-other-job') as never);
    await h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'b', namespace: NS }, spec: {} } as never);
    await eventually(() => {
      const names = redisJobs(h);
      expect(names).to.have.length(1);
      expect(names[0]).to.not.equal('strata-redis-cluster-create-0000000000');
    }, 'only the current Job');
    expect(h.fake.state.tryGet(h.fake.state.typeForKind('batch/v1', 'Job'), NS, 'strata-other-job')).to.not.equal(undefined);
  });
});
