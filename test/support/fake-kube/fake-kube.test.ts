import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { FakeKubeServer } from './index.js';
import { eventually } from '../eventually.js';

const crd = parseYaml(readFileSync(path.resolve(import.meta.dirname, '../../../crds/buckets.strata.dev.yaml'), 'utf8')) as object;

describe('fake Kubernetes API server (client-node unmodified)', () => {
  let fake: FakeKubeServer;
  let kc: k8s.KubeConfig;
  let objects: k8s.KubernetesObjectApi;

  beforeEach(async () => {
    fake = await new FakeKubeServer([crd]).start();
    kc = fake.kubeConfig();
    objects = k8s.KubernetesObjectApi.makeApiClient(kc);
  });
  afterEach(() => fake.stop());

  it('serves discovery, create, get, list with label selectors and 404/409 statuses', async () => {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedConfigMap({ namespace: 'a', body: { metadata: { name: 'one', labels: { app: 'x' } }, data: { k: 'v' } } });
    await core.createNamespacedConfigMap({ namespace: 'a', body: { metadata: { name: 'two' } } });
    const got = await core.readNamespacedConfigMap({ namespace: 'a', name: 'one' });
    expect(got.data).to.deep.equal({ k: 'v' });
    expect(got.metadata?.uid).to.be.a('string');
    const list = await core.listNamespacedConfigMap({ namespace: 'a', labelSelector: 'app=x' });
    expect(list.items.map((i) => i.metadata?.name)).to.deep.equal(['one']);
    const conflict = await core.createNamespacedConfigMap({ namespace: 'a', body: { metadata: { name: 'one' } } }).catch((e: k8s.ApiException<unknown>) => e);
    expect((conflict as k8s.ApiException<unknown>).code).to.equal(409);
    const missing = await core.readNamespacedConfigMap({ namespace: 'a', name: 'nope' }).catch((e: k8s.ApiException<unknown>) => e);
    expect((missing as k8s.ApiException<unknown>).code).to.equal(404);
    // Generic client: discovery of a custom resource.
    const bucket = await objects.create({
      apiVersion: 'strata.dev/v1alpha1',
      kind: 'Bucket',
      metadata: { name: 'b', namespace: 'a' },
      spec: {},
    } as k8s.KubernetesObject);
    expect(bucket.metadata?.generation).to.equal(1);
    const buckets = await objects.list('strata.dev/v1alpha1', 'Bucket', 'a');
    expect(buckets.items).to.have.length(1);
  });

  it('applies server-side with a field manager, bumps generation on spec changes only, keeps status apart', async () => {
    const deployment: k8s.KubernetesObject & { spec: object } = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: 'a', labels: { a: '1' } },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'i' }] } },
      },
    };
    const created = await objects.patch(deployment, undefined, undefined, 'strata-operator', true, k8s.PatchStrategy.ServerSideApply);
    expect(created.metadata?.generation).to.equal(1);
    // Someone scales it by hand (merge patch): generation bumps.
    const edited = await objects.patch(
      { ...deployment, spec: { replicas: 5 } } as k8s.KubernetesObject,
      undefined,
      undefined,
      'someone',
      undefined,
      k8s.PatchStrategy.MergePatch,
    );
    expect((edited as k8s.V1Deployment).spec?.replicas).to.equal(5);
    expect(edited.metadata?.generation).to.equal(2);
    // Re-applying restores the field and drops a label no longer applied.
    const reapplied = await objects.patch<k8s.KubernetesObject>(
      { ...deployment, metadata: { name: 'web', namespace: 'a' } },
      undefined,
      undefined,
      'strata-operator',
      true,
      k8s.PatchStrategy.ServerSideApply,
    );
    expect((reapplied as k8s.V1Deployment).spec?.replicas).to.equal(2);
    expect(reapplied.metadata?.labels).to.equal(undefined);
    // Status goes through /status only.
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    await apps.replaceNamespacedDeploymentStatus({ namespace: 'a', name: 'web', body: { ...(reapplied as k8s.V1Deployment), status: { readyReplicas: 2 } } });
    const read = await apps.readNamespacedDeployment({ namespace: 'a', name: 'web' });
    expect(read.status?.readyReplicas).to.equal(2);
    expect(read.metadata?.generation).to.equal(3);
    const noStatusChange = await apps.replaceNamespacedDeployment({ namespace: 'a', name: 'web', body: { ...read, status: { readyReplicas: 0 } } });
    expect(noStatusChange.status?.readyReplicas).to.equal(2);
    // Stale resourceVersion → 409.
    const stale = await apps
      .replaceNamespacedDeployment({ namespace: 'a', name: 'web', body: { ...read, metadata: { ...read.metadata, resourceVersion: '1' } } })
      .catch((e: k8s.ApiException<unknown>) => e);
    expect((stale as k8s.ApiException<unknown>).code).to.equal(409);
  });

  it('streams watch events to informers, resumes from a resourceVersion, and survives dropped watches', async () => {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const informer = k8s.makeInformer(kc, '/api/v1/namespaces/a/configmaps', () => core.listNamespacedConfigMap({ namespace: 'a' }));
    const seen: string[] = [];
    informer.on('add', (o) => seen.push(`add ${o.metadata?.name}`));
    informer.on('update', (o) => seen.push(`update ${o.metadata?.name}`));
    informer.on('delete', (o) => seen.push(`delete ${o.metadata?.name}`));
    await core.createNamespacedConfigMap({ namespace: 'a', body: { metadata: { name: 'before' } } });
    await informer.start();
    await core.createNamespacedConfigMap({ namespace: 'a', body: { metadata: { name: 'after' } } });
    await core.patchNamespacedConfigMap({ namespace: 'a', name: 'after', body: [{ op: 'add', path: '/data', value: { x: 'y' } }] });
    await eventually(() => expect(seen).to.include('update after'), 'update seen');
    fake.dropWatches();
    await core.deleteNamespacedConfigMap({ namespace: 'a', name: 'before' });
    await eventually(() => expect(seen).to.include('delete before'), 'delete seen after re-watch');
    expect(seen.slice(0, 2)).to.deep.equal(['add before', 'add after']);
    await informer.stop();
  });

  it('keeps objects with finalizers until they are removed, then collects their dependents', async () => {
    const bucket = await objects.create({
      apiVersion: 'strata.dev/v1alpha1',
      kind: 'Bucket',
      metadata: { name: 'b', namespace: 'a', finalizers: ['strata.dev/bucket'] },
      spec: {},
    } as k8s.KubernetesObject);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedConfigMap({
      namespace: 'a',
      body: { metadata: { name: 'owned', ownerReferences: [{ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', name: 'b', uid: bucket.metadata!.uid! }] } },
    });
    await objects.delete(bucket);
    const terminating = await objects.read({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'b', namespace: 'a' } });
    expect(terminating.metadata?.deletionTimestamp).to.not.equal(undefined);
    await objects.patch(
      { ...terminating, metadata: { ...terminating.metadata, finalizers: [] } },
      undefined,
      undefined,
      'test',
      undefined,
      k8s.PatchStrategy.MergePatch,
    );
    await eventually(async () => {
      const left = await core.listNamespacedConfigMap({ namespace: 'a' });
      expect(left.items).to.have.length(0);
    }, 'dependent collected');
    const gone = await objects
      .read({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'b', namespace: 'a' } })
      .catch((e: k8s.ApiException<unknown>) => e);
    expect((gone as k8s.ApiException<unknown>).code).to.equal(404);
  });

  it('defaults custom resources from the CRD schema and refuses invalid ones with 422', async () => {
    const created = (await objects.create({
      apiVersion: 'strata.dev/v1alpha1',
      kind: 'Bucket',
      metadata: { name: 'd', namespace: 'a' },
      spec: {},
    } as k8s.KubernetesObject)) as k8s.KubernetesObject & {
      spec: { deletionPolicy: string; backend: { kind: string } };
    };
    expect(created.spec.deletionPolicy).to.equal('Retain');
    expect(created.spec.backend.kind).to.equal('fs');
    const invalid = await objects
      .create({
        apiVersion: 'strata.dev/v1alpha1',
        kind: 'Bucket',
        metadata: { name: 'bad', namespace: 'a' },
        spec: { deletionPolicy: 'Sometimes' },
      } as k8s.KubernetesObject)
      .catch((e: k8s.ApiException<unknown>) => e);
    expect((invalid as k8s.ApiException<unknown>).code).to.equal(422);
  });

  it('stores Leases with optimistic concurrency', async () => {
    const coordination = kc.makeApiClient(k8s.CoordinationV1Api);
    const lease = await coordination.createNamespacedLease({
      namespace: 'a',
      body: { metadata: { name: 'lock' }, spec: { holderIdentity: 'one', leaseDurationSeconds: 1 } },
    });
    await coordination.replaceNamespacedLease({ namespace: 'a', name: 'lock', body: { ...lease, spec: { holderIdentity: 'two' } } });
    const lost = await coordination
      .replaceNamespacedLease({ namespace: 'a', name: 'lock', body: { ...lease, spec: { holderIdentity: 'three' } } })
      .catch((e: k8s.ApiException<unknown>) => e);
    expect((lost as k8s.ApiException<unknown>).code).to.equal(409);
  });

  it('decodes Lease times as MicroTime: six fractional digits, like the real API server', async () => {
    const coordination = kc.makeApiClient(k8s.CoordinationV1Api);
    // A plain Date serializes with milliseconds (".123Z"): the real decoder refuses it with 400.
    const refused = await coordination
      .createNamespacedLease({ namespace: 'a', body: { metadata: { name: 'ms' }, spec: { holderIdentity: 'one', renewTime: new Date() } } })
      .catch((e: k8s.ApiException<unknown>) => e);
    expect((refused as k8s.ApiException<unknown>).code).to.equal(400);
    const stored = await coordination.createNamespacedLease({
      namespace: 'a',
      body: { metadata: { name: 'us' }, spec: { holderIdentity: 'one', renewTime: new k8s.V1MicroTime() } },
    });
    expect(String(stored.spec?.renewTime)).to.match(/\.\d{6}Z$/);
  });
});
