import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import type { KubeObject } from '../../controllers/support/kube-client.js';
import { loadOperatorEnv } from '../../operator/config.js';
import { ClientNodeKubeClient } from '../../operator/kube-client.js';
import { startOperator, type RunningOperator } from '../../operator/operator.js';
import { eventually, markDeploymentReady, mustGet, stored, type Doc } from '../controllers/support/harness.js';
import { RecordingControlPlane } from '../controllers/support/recording-control-plane.js';
import { FakeKubeServer } from '../support/fake-kube/index.js';
import { CHART_DIR, template, type RenderedObject } from './support/helm.js';
import { authorizerFrom, OPERATOR_TOKEN, RELEASE_NAMESPACE } from './support/rbac-authorizer.js';

const ROOT = path.resolve(CHART_DIR, '../..');
const readYaml = (file: string) => parseYaml(readFileSync(file, 'utf8')) as KubeObject;

/** The sequence of charts/strata/README.md's "Install with Helm", step by step. */
const README_SEQUENCE = [
  'helm install strata charts/strata --namespace strata-system --create-namespace --wait',
  'kubectl create namespace photos',
  "helm upgrade strata charts/strata --namespace strata-system --reuse-values --set 'tenantNamespaces={photos}'",
  'kubectl apply -n photos -f crds/examples/bucket-fs.yaml',
  'kubectl wait -n photos bucket/photos --for=condition=Ready --timeout=10m',
  'helm upgrade strata charts/strata --namespace strata-system --reuse-values \\\n  --set ingress.enabled=true --set ingress.namespace=photos --set ingress.host=s3.example.com \\\n  --set metrics.serviceMonitor.enabled=true',
];

/** The operator's environment as the kubelet would give it the chart's Deployment (fieldRefs and Secret keys resolved). */
function operatorEnv(fake: FakeKubeServer, deployment: Doc): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of deployment.spec.template.spec.containers[0].env as Doc[]) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom.fieldRef) env[e.name] = e.valueFrom.fieldRef.fieldPath === 'metadata.namespace' ? RELEASE_NAMESPACE : 'strata-operator-0';
    else {
      const ref = e.valueFrom.secretKeyRef;
      const secret = stored(fake, 'v1', 'Secret', RELEASE_NAMESPACE, ref.name) as Doc | undefined;
      const value = secret?.stringData?.[ref.key] ?? (secret?.data?.[ref.key] !== undefined ? Buffer.from(secret.data[ref.key], 'base64').toString('utf8') : undefined);
      if (value === undefined && !ref.optional) throw new Error(`the operator pod cannot start: Secret ${ref.name} has no key ${ref.key}`);
      if (value !== undefined) env[e.name] = value;
    }
  }
  return { ...env, PORT: '0', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent' };
}

/**
 * The README's install sequence, run as written against a bare fake API server (no CRDs, no
 * namespaces, NamespaceLifecycle enforced), with the chart's RBAC enforced on the operator and the
 * test playing the cluster's controllers (Deployments, StatefulSets and Jobs become ready).
 */
describe('the README install sequence on a bare cluster', function () {
  this.timeout(120_000);
  let fake: FakeKubeServer;
  let operator: RunningOperator | undefined;
  let cp: RecordingControlPlane | undefined;

  beforeEach(async () => {
    fake = await new FakeKubeServer().start();
    fake.state.requireNamespaces = true;
    operator = undefined;
    cp = undefined;
  });
  afterEach(async () => {
    await operator?.stop();
    await fake.stop();
    await cp?.stop();
  });

  it('is the sequence the chart README documents', () => {
    const readme = readFileSync(path.join(CHART_DIR, 'README.md'), 'utf8');
    for (const step of README_SEQUENCE) expect(readme).to.contain(step);
  });

  it('reaches a Ready Bucket, and the upgrade with the Ingress in the Bucket\u2019s namespace succeeds', async () => {
    const admin = new ClientNodeKubeClient(fake.kubeConfig());
    const namespace = (name: string) => admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    /** What helm and kubectl apply send: every namespaced object in its namespace (the release's by default). */
    const applyAll = async (objs: Array<KubeObject | RenderedObject>, defaultNamespace: string) => {
      for (const obj of objs) {
        const namespaced = fake.state.typeForKind(obj.apiVersion, obj.kind).namespaced;
        await admin.apply({ ...obj, metadata: { ...obj.metadata, ...(namespaced ? { namespace: obj.metadata.namespace ?? defaultNamespace } : {}) } } as KubeObject);
      }
    };

    // 1. helm install --create-namespace --wait: the namespace, crds/ first, then the templates.
    await namespace(RELEASE_NAMESPACE);
    const crdDir = path.join(CHART_DIR, 'crds');
    await applyAll(readdirSync(crdDir).filter((f) => f.endsWith('.yaml')).map((f) => readYaml(path.join(crdDir, f))), RELEASE_NAMESPACE);
    const release = await template();
    fake.authorize = authorizerFrom(release);
    await applyAll(release, RELEASE_NAMESPACE);
    const deployment = release.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-operator') as Doc;
    operator = await startOperator(fake.kubeConfig(OPERATOR_TOKEN), loadOperatorEnv(operatorEnv(fake, deployment)), {
      bucketService: (access) => new HttpBucketService({ ...access, controlPlaneUrl: cp!.url }),
    });
    // --wait: the operator pod passes its readiness probe, and the Deployment reports it.
    await eventually(async () => expect((await fetch(`${operator!.http.url}/readyz`)).status).to.equal(200), 'operator ready', 30_000);
    markDeploymentReady(fake, RELEASE_NAMESPACE, 'strata-operator');

    // The upgrade's Ingress could not go first: namespace photos does not exist yet.
    const upgrade = await template(['tenantNamespaces={photos}', 'ingress.enabled=true', 'ingress.namespace=photos', 'ingress.host=s3.example.com', 'metrics.serviceMonitor.enabled=true']);
    const ingress = upgrade.find((o) => o.kind === 'Ingress')!;
    expect(ingress.metadata.namespace).to.equal('photos');
    const refused = await applyAll([ingress], RELEASE_NAMESPACE).catch((e: unknown) => String(e));
    expect(refused).to.match(/HTTP-Code: 404[\s\S]*namespaces [\\"]*photos[\\"]* not found/);

    // 2.-3. kubectl create namespace photos; helm upgrade --set tenantNamespaces={photos} (the operator may
    // keep its Secrets there); kubectl apply -n photos -f crds/examples/bucket-fs.yaml
    await namespace('photos');
    const tenants = await template(['tenantNamespaces={photos}']);
    await applyAll(tenants, RELEASE_NAMESPACE);
    // The API server authorizes with the RBAC objects it now holds.
    fake.authorize = authorizerFrom(tenants);
    await applyAll([readYaml(path.join(ROOT, 'crds/examples/bucket-fs.yaml'))], 'photos');

    // 4. kubectl wait --for=condition=Ready, while the cluster's controllers bring the stack up.
    const internal = await eventually(() => mustGet(fake, 'v1', 'Secret', 'photos', 'strata-internal'), 'stack secrets', 30_000);
    cp = await new RecordingControlPlane(secretValue(internal as never, 'STRATA_INTERNAL_TOKEN')!).start();
    await eventually(
      () => {
        playClusterControllers(fake, 'photos');
        const bucket = stored(fake, 'strata.dev/v1alpha1', 'Bucket', 'photos', 'photos') as Doc;
        expect(bucket.status?.conditions?.find((c: Doc) => c.type === 'Ready')?.status).to.equal('True');
      },
      'Bucket photos Ready',
      60_000,
    );
    expect(cp.buckets.get('photos')?.lifecycle).to.have.length(2);

    // 5. helm upgrade with the Ingress in photos, and the ServiceMonitor left out without its API.
    expect(upgrade.some((o) => o.kind === 'ServiceMonitor')).to.equal(false);
    await applyAll(upgrade, RELEASE_NAMESPACE);
    mustGet(fake, 'networking.k8s.io/v1', 'Ingress', 'photos', ingress.metadata.name);
    expect(fake.denied, JSON.stringify(fake.denied)).to.deep.equal([]);
  });
});

/** The Deployment, StatefulSet and Job controllers (and the kubelet): every workload of `ns` ready, every Job complete. */
function playClusterControllers(fake: FakeKubeServer, ns: string): void {
  for (const d of fake.state.list(fake.state.typeForKind('apps/v1', 'Deployment'), ns)) {
    if (!(d as Doc).status?.readyReplicas) markDeploymentReady(fake, ns, d.metadata.name);
  }
  const sts = fake.state.typeForKind('apps/v1', 'StatefulSet');
  for (const s of fake.state.list(sts, ns) as Doc[]) {
    const replicas = s.spec.replicas ?? 1;
    if (s.status?.readyReplicas !== replicas) fake.state.update(sts, ns, s.metadata.name, { ...s, status: { replicas, readyReplicas: replicas, availableReplicas: replicas, currentReplicas: replicas, updatedReplicas: replicas, observedGeneration: s.metadata.generation } } as never, 'status');
  }
  const jobs = fake.state.typeForKind('batch/v1', 'Job');
  for (const j of fake.state.list(jobs, ns) as Doc[]) {
    if (!j.status?.succeeded) fake.state.update(jobs, ns, j.metadata.name, { ...j, status: { succeeded: 1, completionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), conditions: [{ type: 'Complete', status: 'True' }] } } as never, 'status');
  }
}
