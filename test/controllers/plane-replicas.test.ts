import { expect } from 'chai';
import type { Bucket } from '../../controllers/api/index.js';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { dataPlaneReplicasFor } from '../../controllers/bucket/plane-replicas.js';
import { renderStorageStack, stackSettingsProblems } from '../../controllers/bucket/render-storage-stack.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import { parseResources, renderResources } from '../../operator/render.js';
import { selects } from '../support/network-policy.js';
import {
  eventually,
  markDeploymentReady,
  markStackReady,
  mustGet,
  startHarness,
  stored,
  TEST_CREDENTIALS,
  TEST_SETTINGS,
  type Doc,
  type Harness,
} from './support/harness.js';
import { RecordingControlPlane } from './support/recording-control-plane.js';
import { validateManifest } from './support/validate-manifest.js';

/** STRATA_DATA_PLANE_REPLICAS / STRATA_CONTROL_PLANE_REPLICAS: the planes replicated when asked, where that is safe. */
describe('replicated data and control planes', () => {
  const replicated = { ...TEST_SETTINGS, gatewayReplicas: 3, dataPlaneReplicas: 3, controlPlaneReplicas: 3 };
  const deployment = (objs: Doc[], name: string) => objs.find((o) => o.kind === 'Deployment' && o.metadata.name === name)!;

  it('renders 3 of each stateless service, each spread over nodes under its own budget of one at a time, schema-valid', async () => {
    const objs = renderStorageStack('ns', [], replicated, TEST_CREDENTIALS) as Doc[];
    const deployments = objs.filter((o) => o.kind === 'Deployment');
    for (const name of ['strata-gateway', 'strata-data-plane', 'strata-control-plane']) {
      const d = deployment(objs, name);
      expect(d.spec.replicas, name).to.equal(3);
      expect(d.spec.strategy, name).to.deep.equal({ type: 'RollingUpdate' });
      const [spread] = d.spec.template.spec.topologySpreadConstraints;
      expect(spread, name).to.include({ maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' });
      // The constraint and the budget count exactly this service's pods.
      for (const other of deployments)
        expect(selects(spread.labelSelector, other.spec.template.metadata.labels), `${name} ~ ${other.metadata.name}`).to.equal(other === d);
      const budgets = objs.filter((o) => o.kind === 'PodDisruptionBudget' && selects(o.spec.selector, d.spec.template.metadata.labels));
      expect(budgets, name).to.have.length(1);
      expect(budgets[0].spec.maxUnavailable, name).to.equal(1);
      for (const o of [d, ...budgets]) await validateManifest(o);
    }
    // Several data planes cannot share the ReadWriteOnce volume: they hold none (scratch space only), and none is made.
    const dataPlane = deployment(objs, 'strata-data-plane');
    expect(dataPlane.spec.template.spec.volumes).to.deep.equal([{ name: 'data', emptyDir: {} }]);
    expect(objs.filter((o) => o.kind === 'PersistentVolumeClaim')).to.have.length(0);
    // Both planes read it: no bucket may keep bytes on a data plane's scratch space.
    expect(objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'strata-config')!.data.STRATA_FS_BACKEND).to.equal('false');
    expect(stackSettingsProblems({ STRATA_FS_BACKEND: 'true' })).to.deep.equal(['STRATA_FS_BACKEND: set by the operator itself']);
  });

  it('one data plane (the default) stays on the data volume, replaced rather than overlapped', () => {
    const objs = renderStorageStack('ns', [], { ...replicated, dataPlaneReplicas: 1 }, TEST_CREDENTIALS) as Doc[];
    const dataPlane = deployment(objs, 'strata-data-plane');
    expect(dataPlane.spec.replicas).to.equal(1);
    expect(dataPlane.spec.strategy).to.deep.equal({ type: 'Recreate' });
    expect(dataPlane.spec.template.spec.volumes[0].persistentVolumeClaim.claimName).to.equal('strata-data');
    expect(dataPlane.spec.template.spec.topologySpreadConstraints).to.equal(undefined);
    expect(objs.filter((o) => o.kind === 'PersistentVolumeClaim')).to.have.length(1);
    expect(objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'strata-config')!.data).to.not.have.property('STRATA_FS_BACKEND');
  });

  it('a namespace with an fs Bucket keeps one data plane; object-store Buckets alone get the configured count', () => {
    const minio = { spec: { backend: { kind: 'minio' } } };
    expect(dataPlaneReplicasFor(replicated, [minio, { spec: { backend: { kind: 'cloud' } } }])).to.equal(3);
    expect(dataPlaneReplicasFor(replicated, [minio, { spec: { backend: { kind: 'fs' } } }])).to.equal(1);
    // No backend: the CRD's default, fs.
    expect(dataPlaneReplicasFor(replicated, [minio, { spec: {} }])).to.equal(1);
  });

  it('operator render applies the same rule: an fs Bucket in the input keeps one data plane', () => {
    const dataPlanes = (yaml: string) =>
      deployment(
        renderResources(parseResources(yaml, 'ns').resources, 'ns', replicated).map((r) => r.object as Doc),
        'strata-data-plane',
      ).spec.replicas;
    const remote =
      'apiVersion: strata.dev/v1alpha1\nkind: Bucket\nmetadata: { name: remote }\nspec: { backend: { kind: minio, endpoint: "http://minio:9000", accessKeySecretRef: { name: c, key: a }, secretKeySecretRef: { name: c, key: s } } }\n';
    expect(dataPlanes(remote)).to.equal(3);
    expect(dataPlanes(`${remote}---\napiVersion: strata.dev/v1alpha1\nkind: Bucket\nmetadata: { name: local }\nspec: {}\n`)).to.equal(1);
  });

  describe('the reconciler with STRATA_DATA_PLANE_REPLICAS=3', () => {
    const NS = 'store';
    let h: Harness;
    let cp: RecordingControlPlane | undefined;
    const bucketCr = (name: string, spec: object) => ({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name, namespace: NS }, spec });
    const getBucket = (name: string) => stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', NS, name) as unknown as Bucket;
    const dataPlane = () => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-data-plane') as Doc;

    beforeEach(async () => {
      cp = undefined;
      h = await startHarness();
      h.start([new BucketReconciler(h.kube, h.events, replicated, (access) => new HttpBucketService({ ...access, controlPlaneUrl: cp!.url }))]);
    });
    afterEach(async () => {
      await h.stop();
      await cp?.stop();
    });

    it('runs 3 data planes for object-store Buckets; an fs Bucket brings it back to one on the volume and waits for it, and says why', async () => {
      const refs = { accessKeySecretRef: { name: 'minio-creds', key: 'ak' }, secretKeySecretRef: { name: 'minio-creds', key: 'sk' } };
      await h.kube.apply(bucketCr('remote', { backend: { kind: 'minio', endpoint: 'http://minio:9000', ...refs } }) as never);
      await eventually(() => expect(dataPlane().spec.replicas).to.equal(3), '3 data planes');
      expect(dataPlane().spec.template.spec.volumes).to.deep.equal([{ name: 'data', emptyDir: {} }]);
      cp = await new RecordingControlPlane(secretValue(mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal') as never, 'STRATA_INTERNAL_TOKEN')!).start();
      await markStackReady(h.fake, NS);
      markDeploymentReady(h.fake, NS, 'strata-data-plane');

      await h.kube.apply(bucketCr('local', {}) as never);
      await eventually(() => {
        expect(dataPlane().spec.replicas).to.equal(1);
        expect(dataPlane().spec.template.spec.volumes[0].persistentVolumeClaim.claimName).to.equal('strata-data');
      }, 'one data plane on the volume');
      mustGet(h.fake, 'v1', 'PersistentVolumeClaim', NS, 'strata-data');
      // The three volume-less pods still run: no fs bucket is made until they are gone.
      await eventually(
        () => expect(getBucket('local').status?.conditions?.find((c) => c.type === 'Progressing')?.reason).to.equal('WaitingForDataVolume'),
        'waits for the rollout',
      );
      expect(cp.buckets.has('local')).to.equal(false);
      markDeploymentReady(h.fake, NS, 'strata-data-plane');
      await eventually(() => {
        const ready = getBucket('local').status?.conditions?.find((c) => c.type === 'Ready');
        expect(ready?.status).to.equal('True');
        expect(ready?.message).to.match(/the data plane runs 1 replica, not the 3 STRATA_DATA_PLANE_REPLICAS asks for: fs Buckets/);
      }, 'fs bucket ready, with the reason for one data plane');
      expect(cp.buckets.has('local')).to.equal(true);
    });
  });
});
