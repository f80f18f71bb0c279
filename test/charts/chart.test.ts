import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { generateCrdFiles } from '../../hack/gen-crds.js';
import { validateManifest } from '../controllers/support/validate-manifest.js';
import { loadOperatorEnv, settingsFrom } from '../../operator/config.js';
import { CHART_DIR, helm, template, type RenderedObject } from './support/helm.js';

const root = path.resolve(import.meta.dirname, '../..');
const RELEASE = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
const kinds = (objs: RenderedObject[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`);

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

describe('Helm chart charts/strata (real helm binary)', function () {
  this.timeout(120_000);

  it('passes helm lint', async () => {
    const result = await helm(['lint', CHART_DIR, '--strict']);
    expect(result.code, result.stdout + result.stderr).to.equal(0);
  });

  it('renders the operator, its ServiceAccount, RBAC and dashboards by default, all schema-valid', async () => {
    const objs = await template();
    for (const o of objs) await validateManifest(o);
    expect(kinds(objs)).to.include.members([
      'ServiceAccount/strata-operator',
      // Cluster-scoped names carry the release namespace: two releases named strata in two namespaces do not collide.
      'ClusterRole/strata-system-strata-operator',
      'ClusterRoleBinding/strata-system-strata-operator',
      'ClusterRole/strata-system-strata-operator-secrets',
      'Role/strata-operator-leader-election',
      'RoleBinding/strata-operator-leader-election',
      'Deployment/strata-operator',
      'Service/strata-operator-metrics',
      'ConfigMap/strata-dashboard-object-store',
      'ConfigMap/strata-dashboard-image-search',
      'ConfigMap/strata-dashboard-model-server',
      'ConfigMap/strata-dashboard-operator',
    ]);
    expect(kinds(objs).some((k) => k.startsWith('Ingress/') || k.startsWith('ServiceMonitor/'))).to.equal(false);
    const deployment = objs.find((o) => o.kind === 'Deployment') as RenderedObject & { spec: { template: { spec: { containers: Array<{ image: string; env: Array<{ name: string; value?: string }> }> } } } };
    const container = deployment.spec.template.spec.containers[0]!;
    // The chart's appVersion, package.json's version (test/hack/release-version.test.ts).
    expect(container.image).to.equal(`ghcr.io/strata-dev/operator:${RELEASE}`);
    expect(container.env.find((e) => e.name === 'STRATA_IMAGE_TAG')?.value).to.equal(RELEASE);
    expect(container.env.find((e) => e.name === 'STRATA_GPU_IMAGE_SUFFIX')?.value).to.equal('-cuda');
  });

  it('renders the optional ingress, ServiceMonitors and poem app, and a namespaced Role when watching one namespace', async () => {
    const objs = await template([
      'ingress.enabled=true',
      'ingress.namespace=data',
      'ingress.className=nginx',
      'metrics.serviceMonitor.enabled=true',
      'poemApp.enabled=true',
      'watchNamespace=data',
    ], ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor']);
    for (const o of objs) await validateManifest(o);
    const names = kinds(objs);
    expect(names).to.include.members(['Ingress/strata-s3', 'ServiceMonitor/strata-operator', 'ServiceMonitor/strata-platform', 'Deployment/strata-poem-app', 'Service/strata-poem-app', 'Role/strata-operator', 'RoleBinding/strata-operator']);
    expect(names.some((n) => n.startsWith('ClusterRole'))).to.equal(false);
    expect(names).to.include.members(['Role/strata-operator-secrets', 'RoleBinding/strata-operator-secrets']);
    const ingress = objs.find((o) => o.kind === 'Ingress') as RenderedObject & { spec: { rules: Array<{ http: { paths: Array<{ backend: { service: { name: string; port: { number: number } } } }> } }> } };
    expect(ingress.metadata.namespace).to.equal('data');
    expect(ingress.spec.rules[0]!.http.paths[0]!.backend.service).to.deep.equal({ name: 'strata-gateway', port: { number: 9000 } });
    expect(names).to.not.include('Secret/strata-poem-app');
  });

  it('hands the operator its PostgreSQL (with replicas) and RabbitMQ URLs through a Secret, or an existing one', async () => {
    type Env = Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
    const operatorEnv = (objs: RenderedObject[]) =>
      (objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-operator') as RenderedObject & { spec: { template: { spec: { containers: Array<{ env: Env }> } } } }).spec.template.spec.containers[0]!.env;
    const objs = await template(['platform.postgresUrl=postgres://strata:pw@db:5432/strata', 'platform.postgresReplicaUrls={postgres://strata:pw@db-r1:5432/strata,postgres://strata:pw@db-r2:5432/strata}']);
    for (const o of objs) await validateManifest(o);
    // Not named like the operator's per-namespace strata-platform: a Bucket in the release namespace must not take it over.
    const secret = objs.find((o) => o.kind === 'Secret' && o.metadata.name === 'strata-operator-platform') as RenderedObject & { stringData: Record<string, string> };
    expect(objs.some((o) => o.metadata.name === 'strata-platform' && o.kind === 'Secret')).to.equal(false);
    expect(secret.stringData).to.deep.equal({
      STRATA_PG_URL: 'postgres://strata:pw@db:5432/strata',
      STRATA_PG_REPLICA_URLS: 'postgres://strata:pw@db-r1:5432/strata,postgres://strata:pw@db-r2:5432/strata',
      STRATA_AMQP_URL: '',
    });
    const env = operatorEnv(objs);
    expect(JSON.stringify(env)).to.not.contain('pw@');
    for (const name of ['STRATA_PG_URL', 'STRATA_PG_REPLICA_URLS', 'STRATA_AMQP_URL']) {
      expect(env.find((e) => e.name === name)?.valueFrom?.secretKeyRef, name).to.deep.include({ name: 'strata-operator-platform', key: name });
    }
    const existing = await template(['platform.existingSecret=my-db-urls']);
    expect(existing.some((o) => o.kind === 'Secret' && o.metadata.name === 'strata-operator-platform')).to.equal(false);
    expect(operatorEnv(existing).find((e) => e.name === 'STRATA_PG_URL')?.valueFrom?.secretKeyRef?.name).to.equal('my-db-urls');
  });

  it('names nothing like an object the operator creates, so a Bucket in the release namespace takes nothing over', async () => {
    const { renderStorageStack, renderFlowRulesConfigMap } = await import('../../controllers/bucket/render-storage-stack.js');
    const { renderStackSecrets } = await import('../../controllers/bucket/stack-secrets.js');
    const { DEFAULT_SETTINGS } = await import('../../controllers/support/settings.js');
    const { TEST_CREDENTIALS } = await import('../controllers/support/harness.js');
    const operatorMade = new Set(
      [...renderStorageStack('strata-system', [], DEFAULT_SETTINGS, TEST_CREDENTIALS), ...renderStackSecrets('strata-system'), renderFlowRulesConfigMap('strata-system')].map((o) => `${o.kind}/${o.metadata.name}`),
    );
    const objs = await template(['ingress.enabled=true', 'metrics.serviceMonitor.enabled=true', 'poemApp.enabled=true', 'poemApp.apiKey=k', 'replicaCount=2']);
    expect(kinds(objs).filter((k) => operatorMade.has(k))).to.deep.equal([]);
  });

  it('keeps the poem app\'s upstream API key in a Secret, never in the Deployment', async () => {
    const objs = await template(['poemApp.enabled=true', 'poemApp.apiKey=sk-test-123']);
    for (const o of objs) await validateManifest(o);
    const secret = objs.find((o) => o.kind === 'Secret' && o.metadata.name === 'strata-poem-app') as RenderedObject & { stringData: Record<string, string> };
    expect(secret.stringData.API_KEY).to.equal('sk-test-123');
    const deployment = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-poem-app')!;
    expect(JSON.stringify(deployment)).to.not.contain('sk-test-123');
    expect(JSON.stringify(deployment)).to.contain('secretKeyRef');
  });

  it("tells the poem app's visitors apart behind an ingress only when poemApp.trustProxy names it", async () => {
    const trustOf = async (sets: string[]) => {
      const objs = await template(['poemApp.enabled=true', ...sets]);
      for (const o of objs) await validateManifest(o);
      const deployment = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-poem-app') as RenderedObject & {
        spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
      };
      return deployment.spec.template.spec.containers[0]!.env.find((e) => e.name === 'STRATA_TRUST_PROXY')?.value;
    };
    expect(await trustOf([])).to.equal(undefined);
    expect(await trustOf(['poemApp.trustProxy=10.0.0.0/8'])).to.equal('10.0.0.0/8');
  });

  it('keeps a standby replica on another node and through drains when replicaCount > 1', async () => {
    expect((await template()).some((o) => o.kind === 'PodDisruptionBudget')).to.equal(false);
    const objs = await template(['replicaCount=2']);
    for (const o of objs) await validateManifest(o);
    const pdb = objs.find((o) => o.kind === 'PodDisruptionBudget') as RenderedObject & { spec: { minAvailable: number; selector: { matchLabels: object } } };
    expect(pdb.spec.minAvailable).to.equal(1);
    const deployment = objs.find((o) => o.kind === 'Deployment') as RenderedObject & { spec: { template: { spec: { affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: Array<{ podAffinityTerm: { labelSelector: { matchLabels: object } } }> } } } } } };
    const term = deployment.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]!.podAffinityTerm;
    expect(term.labelSelector.matchLabels).to.deep.equal(pdb.spec.selector.matchLabels);
  });

  it('grants least privilege: no wildcards, no deletes, Secrets neither listed nor watched nor granted cluster-wide', async () => {
    const objs = await template(['tenantNamespaces={photos,logs}']);
    const rules = objs.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role').flatMap((o) => o.rules as Rule[]);
    for (const rule of rules) {
      expect([...rule.apiGroups, ...rule.resources, ...rule.verbs]).to.not.include('*');
      expect(rule.verbs).to.not.include.members(['delete', 'deletecollection']);
    }
    const secrets = rules.filter((r) => r.resources.includes('secrets'));
    expect(secrets.flatMap((r) => r.verbs).sort()).to.deep.equal(['create', 'get', 'patch']);
    expect(secrets.find((r) => r.verbs.includes('patch'))).to.deep.include({ resourceNames: ['strata-platform'] });
    // The ClusterRole holding them is bound only by RoleBindings, in the listed tenant namespaces.
    const secretRoles = objs.filter((o) => (o.rules as Rule[] | undefined)?.some((r) => r.resources.includes('secrets'))).map((o) => o.metadata.name);
    expect(secretRoles).to.deep.equal(['strata-system-strata-operator-secrets']);
    const bindings = objs.filter((o) => (o as { roleRef?: { name: string } }).roleRef?.name === secretRoles[0]);
    expect(bindings.map((b) => `${b.kind}/${b.metadata.namespace}`).sort()).to.deep.equal(['RoleBinding/logs', 'RoleBinding/photos']);
    expect(rules.some((r) => r.resources.includes('leases') && r.verbs.includes('update'))).to.equal(true);
    expect(rules.some((r) => r.resources.includes('buckets/status') && r.verbs.includes('patch'))).to.equal(true);
  });

  it('ships the generated CRDs (the drift test keeps them in sync) and renders them with --include-crds', async () => {
    const objs = await template([], ['--include-crds']);
    const crds = objs.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.map((c) => c.metadata.name).sort()).to.deep.equal(['buckets.strata.dev', 'imageindexes.strata.dev', 'modelservers.strata.dev']);
    for (const c of crds) await validateManifest(c);
    expect(readdirSync(path.join(CHART_DIR, 'crds')).sort()).to.deep.equal([...generateCrdFiles().keys()].sort());
  });

  it("hands platform.settings to the operator, which gives them to the stack; virtualHostedStyle adds the ingress host as the S3 domain", async () => {
    const stackSettings = async (sets: string[]) => {
      const objs = await template(sets);
      for (const o of objs) await validateManifest(o);
      const operator = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-operator') as RenderedObject & { spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } } };
      const json = operator.spec.template.spec.containers[0]!.env.find((e) => e.name === 'STRATA_STACK_SETTINGS')!.value!;
      // What the operator makes of the chart's value.
      const hosts = (objs.find((o) => o.kind === 'Ingress') as (RenderedObject & { spec: { rules: Array<{ host: string }> } }) | undefined)?.spec.rules.map((r) => r.host);
      return { settings: settingsFrom(loadOperatorEnv({ STRATA_STACK_SETTINGS: json })).stackSettings, hosts };
    };
    // Every stack gets the gateway's S3 switches (platform.s3, test/charts/s3-switches.test.ts).
    const S3 = { STRATA_SIGV2: 'true', STRATA_BLOCK_PUBLIC_ACLS: 'false', STRATA_DEFAULT_OBJECT_OWNERSHIP: 'BucketOwnerEnforced' };
    expect((await stackSettings([])).settings).to.deep.equal(S3);
    expect((await stackSettings(['platform.settings.STRATA_BUCKET_CACHE_MS=500', 'platform.settings.LOG_LEVEL=debug'])).settings).to.deep.equal({ STRATA_BUCKET_CACHE_MS: '500', LOG_LEVEL: 'debug', ...S3 });
    const virtual = await stackSettings(['ingress.enabled=true', 'ingress.host=s3.example.com', 'ingress.virtualHostedStyle=true']);
    expect(virtual).to.deep.equal({ settings: { STRATA_S3_DOMAINS: 's3.example.com', STRATA_TRUST_PROXY: 'uniquelocal', ...S3 }, hosts: ['s3.example.com', '*.s3.example.com'] });
    // Set explicitly, the administrator's domains win; without virtualHostedStyle the ingress has one host.
    expect((await stackSettings(['ingress.enabled=true', 'ingress.host=s3.example.com', 'ingress.virtualHostedStyle=true', 'platform.settings.STRATA_S3_DOMAINS=s3.example.com\\,s3.internal'])).settings).to.deep.equal({ STRATA_S3_DOMAINS: 's3.example.com,s3.internal', STRATA_TRUST_PROXY: 'uniquelocal', ...S3 });
    // Behind the ingress, the gateway believes the controller's X-Forwarded-For (its pods: ingress.trustedProxies); without an ingress it believes no one.
    expect((await stackSettings(['ingress.enabled=true', 'ingress.trustedProxies=10.42.0.0/16'])).settings).to.deep.equal({ STRATA_TRUST_PROXY: '10.42.0.0/16', ...S3 });
    expect((await stackSettings(['ingress.enabled=true', 'platform.settings.STRATA_TRUST_PROXY=false'])).settings).to.deep.equal({ STRATA_TRUST_PROXY: 'false', ...S3 });
    expect((await stackSettings(['ingress.enabled=true', 'ingress.host=s3.example.com'])).hosts).to.deep.equal(['s3.example.com']);
  });

  it('hands platform.gatewayReplicas to the operator, which runs that many gateways per stack', async () => {
    const replicas = async (sets: string[]) => {
      const objs = await template(sets);
      const operator = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-operator') as RenderedObject & { spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } } };
      const value = operator.spec.template.spec.containers[0]!.env.find((e) => e.name === 'STRATA_GATEWAY_REPLICAS')!.value!;
      return settingsFrom(loadOperatorEnv({ STRATA_GATEWAY_REPLICAS: value })).gatewayReplicas;
    };
    expect(await replicas([])).to.equal(1);
    expect(await replicas(['platform.gatewayReplicas=3'])).to.equal(3);
  });

  it('hands platform.dataPlaneReplicas and platform.controlPlaneReplicas to the operator', async () => {
    const planes = async (sets: string[]) => {
      const objs = await template(sets);
      const operator = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-operator') as RenderedObject & { spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } } };
      const env = Object.fromEntries(operator.spec.template.spec.containers[0]!.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
      const settings = settingsFrom(loadOperatorEnv(env));
      return [settings.dataPlaneReplicas, settings.controlPlaneReplicas];
    };
    expect(await planes([])).to.deep.equal([1, 1]);
    expect(await planes(['platform.dataPlaneReplicas=3', 'platform.controlPlaneReplicas=2'])).to.deep.equal([3, 2]);
  });

  it('rejects values that break values.schema.json', async () => {
    for (const bad of ['replicaCount=-1', 'logLevel=loud', 'platform.postgresUrl=mysql://x', 'image.pullPolicy=Sometimes', 'unknownKey=1', 'platform.settings.bad-name=1', 'platform.settings.STRATA_X.nested=1', 'platform.gatewayReplicas=0', 'platform.dataPlaneReplicas=0', 'platform.controlPlaneReplicas=51']) {
      const result = await helm(['template', 'strata', CHART_DIR, '--set', bad]);
      expect(result.code, bad).to.not.equal(0);
      expect(result.stderr, bad).to.match(/schema|values don't meet/i);
    }
  });

  it('has Grafana dashboards that query metrics the services and the operator export', () => {
    const dir = path.join(CHART_DIR, 'files/dashboards');
    const sources = [
      readFileSync(path.join(root, 'operator/metrics.ts'), 'utf8'),
      readFileSync(path.join(root, 'images/service-kit/src/metrics.ts'), 'utf8'),
      ...readdirSync(path.join(root, 'images'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts') && f.includes('src'))
        .map((f) => readFileSync(path.join(root, 'images', f), 'utf8')),
    ].join('\n');
    const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    expect(files.sort()).to.deep.equal(['image-search.json', 'model-server.json', 'object-store.json', 'operator.json']);
    for (const file of files) {
      const dashboard = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { uid: string; title: string; panels: Array<{ targets: Array<{ expr: string }> }> };
      expect(dashboard.uid).to.match(/^strata-/);
      expect(dashboard.panels.length, file).to.be.greaterThan(3);
      for (const expr of dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr))) {
        // Metric names: identifiers with an underscore right before a selector, a range or a closing parenthesis.
        const metrics = [...expr.matchAll(/\b([a-z][a-z0-9:]*_[a-z0-9_:]*?)(?:_bucket)?(?=[{[)])/g)].map((m) => m[1]!);
        for (const metric of metrics) expect(sources, `${file}: ${metric}`).to.contain(`'${metric}'`);
        // Every data-plane replica counts the one shared outbox: its replicas' figures are one figure, not parts of a sum.
        if (expr.includes('strata_outbox_backlog')) expect(expr, file).to.match(/max by \(namespace\) \(strata_outbox_backlog\b/);
      }
    }
  });
});

describe('Helm chart objects on the wire (client-node serialization)', function () {
  this.timeout(60_000);

  it('reach the API server field for field, as a client would apply them', async () => {
    const { startHarness, stored } = await import('../controllers/support/harness.js');
    const h = await startHarness();
    try {
      const objs = await template(['ingress.enabled=true', 'poemApp.enabled=true', 'poemApp.apiKey=k', 'platform.postgresReplicaUrls={postgres://r/s}']);
      const lost = (sent: unknown, got: unknown, at: string): string[] => {
        if (sent && typeof sent === 'object') {
          if (!got || typeof got !== 'object') return [at];
          return Object.entries(sent).flatMap(([k, v]) => lost(v, (got as Record<string, unknown>)[k], `${at}.${k}`));
        }
        return sent === got ? [] : [`${at} (${JSON.stringify(sent)} → ${JSON.stringify(got)})`];
      };
      const problems: string[] = [];
      let applied = 0;
      for (const obj of objs.filter((o) => o.kind !== 'ServiceMonitor')) {
        await h.kube.apply(obj as never);
        problems.push(...lost(obj, stored(h.fake, obj.apiVersion, obj.kind, obj.metadata.namespace ?? '', obj.metadata.name), `${obj.kind}/${obj.metadata.name}`));
        applied++;
      }
      expect(problems).to.deep.equal([]);
      expect(applied).to.be.greaterThan(12);
    } finally {
      await h.stop();
    }
  });
});
