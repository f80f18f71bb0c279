import { expect } from 'chai';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import type { IndexWorkerClient } from '../../controllers/image-index/index-worker-client.js';
import { HttpReaderKeyService } from '../../controllers/image-index/source-reader.js';
import { loadOperatorEnv } from '../../operator/config.js';
import { startOperator, type RunningOperator } from '../../operator/operator.js';
import { eventually, markDeploymentReady, markStackReady, mustGet, startHarness, stored, type Harness } from '../controllers/support/harness.js';
import { RecordingControlPlane } from '../controllers/support/recording-control-plane.js';
import { template } from './support/helm.js';
import { authorizerFrom, OPERATOR_TOKEN, RELEASE_NAMESPACE } from './support/rbac-authorizer.js';

/**
 * The chart's RBAC is enough for everything the operator does, and no more than the rules the chart
 * test checks: the whole operator runs against the fake API server with the rendered rules enforced.
 */
describe('Helm chart RBAC enforced on the running operator', function () {
  this.timeout(60_000);

  for (const mode of ['cluster', 'namespace'] as const) {
    describe(mode === 'cluster' ? 'watching every namespace (ClusterRole)' : 'watching one namespace (Role)', () => {
      const NS = 'store';
      let h: Harness;
      let operator: RunningOperator | undefined;
      let cp: RecordingControlPlane | undefined;

      beforeEach(async () => {
        h = await startHarness();
        const objs = await template(mode === 'namespace' ? [`watchNamespace=${NS}`] : [`tenantNamespaces={${NS}}`]);
        h.fake.authorize = authorizerFrom(objs);
        operator = undefined;
        cp = undefined;
      });
      afterEach(async () => {
        await operator?.stop();
        await h.stop();
        await cp?.stop();
      });

      it('reconciles Buckets (Delete policy), ImageIndexes with Jobs and ModelServers, and records Events, without one refused request', async () => {
        const worker: IndexWorkerClient = { status: async () => ({ vectors: 10, bufferSize: 0 }) };
        const cfg = loadOperatorEnv({
          PORT: '0',
          LOG_LEVEL: 'silent',
          POD_NAME: 'operator-0',
          LEADER_ELECTION_NAMESPACE: RELEASE_NAMESPACE,
          LEADER_ELECTION_LEASE_NAME: 'strata-operator',
          WATCH_NAMESPACE: mode === 'namespace' ? NS : '',
        });
        operator = await startOperator(h.fake.kubeConfig(OPERATOR_TOKEN), cfg, {
          bucketService: (access) => new HttpBucketService({ ...access, controlPlaneUrl: cp!.url }),
          readerKeys: (access) => new HttpReaderKeyService({ ...access, controlPlaneUrl: cp!.url }),
          indexWorker: worker,
        });
        await eventually(() => expect(operator!.manager.isLeader).to.equal(true), 'leading');

        await h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'data', namespace: NS }, spec: { deletionPolicy: 'Delete' } } as never);
        const internal = await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
        cp = await new RecordingControlPlane(secretValue(internal as never, 'STRATA_INTERNAL_TOKEN')!).start();
        await markStackReady(h.fake, NS);
        await eventually(() => expect(cp!.buckets.has('data')).to.equal(true), 'bucket created');

        await h.kube.apply({
          apiVersion: 'strata.dev/v1alpha1',
          kind: 'ImageIndex',
          metadata: { name: 'photos', namespace: NS },
          spec: { source: { bucket: 'data' }, model: { directory: '/models' }, autoMerge: false, mergeRequest: 'now' },
        } as never);
        await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker'), 'index worker');
        markDeploymentReady(h.fake, NS, 'photos-index-worker');
        await eventually(() => expect(h.fake.state.list(h.fake.state.typeForKind('batch/v1', 'Job'), NS).some((j) => j.metadata.name.startsWith('photos-merge-'))).to.equal(true), 'merge Job');
        // The worker's read-only key: its Secret created (never patched) and the store's key brought to it.
        await eventually(() => expect(cp!.scopedKeys.get(`imageindex.${NS}.photos`)?.resources).to.deep.equal([{ bucket: 'data', prefix: '' }]), 'reader key');
        mustGet(h.fake, 'v1', 'Secret', NS, 'photos-index-reader');

        await h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name: 'tiny', namespace: NS }, spec: {} } as never);
        await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server'), 'model server');
        await eventually(() => {
          const ms = mustGet(h.fake, 'strata.dev/v1alpha1', 'ModelServer', NS, 'tiny') as { status?: { observedGeneration?: number } };
          expect(ms.status?.observedGeneration).to.equal(1);
        }, 'model server status');

        await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'data' });
        await eventually(() => expect(stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', NS, 'data')).to.equal(undefined), 'finalized');
        expect(cp.buckets.has('data')).to.equal(false);

        const events = h.fake.state.list(h.fake.state.typeForKind('v1', 'Event'), NS).map((e) => e.reason);
        expect(events).to.include.members(['BucketCreated', 'MergeStarted', 'BucketDeleted']);
        expect(h.fake.denied, JSON.stringify(h.fake.denied)).to.deep.equal([]);
        if (mode === 'cluster') {
          // A namespace not listed in tenantNamespaces: its Bucket says why it gets no stack (no Secret there).
          await h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'data', namespace: 'unlisted' }, spec: {} } as never);
          await eventually(() => {
            const b = mustGet(h.fake, 'strata.dev/v1alpha1', 'Bucket', 'unlisted', 'data') as { status?: { conditions?: Array<{ type: string; reason: string; message: string }> } };
            const degraded = b.status?.conditions?.find((c) => c.type === 'Degraded');
            expect(degraded?.reason).to.equal('StackApplyFailed');
            expect(degraded?.message).to.match(/forbidden|403/i);
          }, 'unlisted namespace refused');
          expect(h.fake.denied.every((d) => d.namespace === 'unlisted' && d.resource === 'secrets')).to.equal(true);
        }
        // The rules are enforced: what the chart does not grant is refused.
        const forbidden = await operator.manager.stop().then(() =>
          fetch(`${h.fake.url}/apis/apps/v1/namespaces/${NS}/deployments/tiny-model-server`, { method: 'DELETE', headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } }),
        );
        expect(forbidden.status).to.equal(403);
        // No Secret outside the tenant namespace: kube-system's cannot be read, created or patched.
        const asOperator = (method: string, path: string, body?: object) =>
          fetch(`${h.fake.url}/api/v1/namespaces/kube-system/secrets${path}`, {
            method,
            headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' },
            ...(body ? { body: JSON.stringify(body) } : {}),
          });
        for (const name of ['strata-platform', 'strata-internal', 'bootstrap-token-abc']) {
          expect((await asOperator('GET', `/${name}`)).status, `get kube-system/${name}`).to.equal(403);
          expect((await asOperator('PATCH', `/${name}`, { data: {} })).status, `patch kube-system/${name}`).to.equal(403);
        }
        expect((await asOperator('POST', '', { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'planted' } })).status).to.equal(403);
        // Nor in another namespace where a Bucket would need them: it is refused there, not granted.
        expect((await fetch(`${h.fake.url}/api/v1/namespaces/other/secrets/strata-internal`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })).status).to.equal(403);
      });
    });
  }
});
