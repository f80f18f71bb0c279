import { expect } from 'chai';
import { renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { renderStackSecrets, secretValue } from '../../controllers/bucket/stack-secrets.js';
import type { Manifest } from '../../controllers/support/kube-client.js';
import { NetworkPolicyEvaluator, podsOf, type NetworkPolicy, type PodInfo } from '../support/network-policy.js';
import { TEST_SETTINGS } from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';

const owners = (ns: string) => [{ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', name: 'photos', uid: `uid-${ns}` }];

/** A namespace's stack as the operator renders it: the generated Secrets (random per namespace) and the applied objects. */
function stack(ns: string): Manifest[] {
  const secrets = renderStackSecrets(ns);
  const backing = secrets.find((s) => s.metadata.name === 'strata-backing-credentials')!;
  const credentials = {
    postgresPassword: secretValue(backing as never, 'POSTGRES_PASSWORD')!,
    rabbitmqPassword: secretValue(backing as never, 'RABBITMQ_PASSWORD')!,
  };
  return [...secrets, ...renderStorageStack(ns, owners(ns), TEST_SETTINGS, credentials)];
}

const pod = (namespace: string, name: string, labels: Record<string, string>): PodInfo => ({ name, namespace, labels, ports: [] });

/** Every value of the namespace's Secrets (decoded), but the root user's name, which is not a secret. */
function secretValues(objects: Manifest[]): string[] {
  return objects
    .filter((o) => o.kind === 'Secret')
    .flatMap((o) => {
      const s = o as { stringData?: Record<string, string>; data?: Record<string, string> };
      return [
        ...Object.entries(s.stringData ?? {})
          .filter(([k]) => k !== 'STRATA_ROOT_USER')
          .map(([, v]) => v),
        ...Object.values(s.data ?? {}).map((v) => Buffer.from(v, 'base64').toString()),
      ];
    });
}

describe('NetworkPolicy evaluator (test support)', () => {
  const a = pod('a', 'a', { app: 'x' });
  const b = pod('b', 'b', { app: 'x' });
  const target: PodInfo = { name: 't', namespace: 'a', labels: { app: 'db' }, ports: [{ name: 'db', containerPort: 5432 }] };
  const policy = (ingress: NetworkPolicy['spec']['ingress']): NetworkPolicy => ({
    metadata: { name: 'p', namespace: 'a' },
    spec: { podSelector: { matchLabels: { app: 'db' } }, policyTypes: ['Ingress'], ingress },
  });

  it('admits everything to unselected pods, nothing to a selected pod without rules', () => {
    expect(new NetworkPolicyEvaluator([], {}).allows(b, target, 5432)).to.equal(true);
    expect(new NetworkPolicyEvaluator([policy([])], {}).allows(a, target, 5432)).to.equal(false);
  });

  it('reads a podSelector alone as the policy namespace, a namespaceSelector by labels, named ports through container ports', () => {
    const samePods = new NetworkPolicyEvaluator([policy([{ from: [{ podSelector: {} }], ports: [{ port: 'db' }] }])], {});
    expect(samePods.allows(a, target, 5432)).to.equal(true);
    expect(samePods.allows(b, target, 5432)).to.equal(false);
    expect(samePods.allows(a, target, 5433)).to.equal(false);
    const fromB = new NetworkPolicyEvaluator(
      [policy([{ from: [{ namespaceSelector: { matchLabels: { team: 'b' } }, podSelector: { matchLabels: { app: 'x' } } }] }])],
      {
        b: { team: 'b' },
      },
    );
    expect(fromB.allows(b, target, 5432)).to.equal(true);
    expect(fromB.allows(a, target, 5432)).to.equal(false);
    expect(fromB.allows(pod('b', 'other', { app: 'y' }), target, 5432)).to.equal(false);
  });
});

describe("each namespace's stack sealed off by its NetworkPolicies", () => {
  const A = stack('tenant-a');
  const B = stack('tenant-b');
  const policies = [...A, ...B].filter((o) => o.kind === 'NetworkPolicy') as unknown as NetworkPolicy[];
  const net = new NetworkPolicyEvaluator(policies, {});
  const { ingressController, prometheus, operator } = TEST_SETTINGS.networkPolicy;
  const appA = pod('tenant-a', 'app', { app: 'photos' });
  const appB = pod('tenant-b', 'app', { app: 'photos' });
  const outsiders = [
    appB,
    ...podsOf(B),
    pod('kube-system', 'any', { k8s: 'app' }),
    pod(ingressController.namespace, 'not-the-controller', { app: 'other' }),
    pod('elsewhere', 'fake-controller', ingressController.podLabels),
  ];
  const podsA = podsOf(A);
  const podNamed = (pods: PodInfo[], name: string) => pods.find((p) => p.name === name)!;
  const serversOf = (pods: PodInfo[]) =>
    pods.filter((p) => ['redis', 'postgresql', 'rabbitmq', 'data-plane', 'control-plane'].includes(p.labels['app.kubernetes.io/name']!));

  it('renders schema-valid NetworkPolicies and disruption budgets for every stack', async () => {
    expect(policies.map((p) => p.metadata.name).filter((n) => n.startsWith('strata-'))).to.have.length(8);
    for (const o of [...A, ...B].filter((x) => ['NetworkPolicy', 'PodDisruptionBudget'].includes(x.kind))) await validateManifest(o);
  });

  it("admits no pod of another namespace to a stack's Redis, PostgreSQL, RabbitMQ, data plane or control plane", () => {
    const servers = serversOf(podsA);
    expect(servers.map((s) => s.labels['app.kubernetes.io/name'])).to.include.members(['redis', 'postgresql', 'rabbitmq', 'data-plane', 'control-plane']);
    for (const to of servers) {
      for (const port of to.ports.map((p) => p.containerPort)) {
        for (const from of outsiders) expect(net.allows(from, to, port), `${from.namespace}/${from.name} → tenant-a/${to.name}:${port}`).to.equal(false);
        // and the other way round
        const mirror = podsOf(B).find((p) => p.name === to.name)!;
        for (const from of [appA, ...podsA]) expect(net.allows(from, mirror, port), `tenant-a/${from.name} → tenant-b/${mirror.name}:${port}`).to.equal(false);
      }
    }
  });

  it("admits the stack's own pods to each other, the namespace's apps and the ingress controller to the gateway only", () => {
    const redis0 = podNamed(podsA, 'StatefulSet/strata-redis-0');
    const redis1 = podNamed(podsA, 'StatefulSet/strata-redis-1');
    const dataPlane = podNamed(podsA, 'Deployment/strata-data-plane');
    const controlPlane = podNamed(podsA, 'Deployment/strata-control-plane');
    const gateway = podNamed(podsA, 'Deployment/strata-gateway');
    const postgres = podNamed(podsA, 'StatefulSet/strata-postgresql');
    const replica = podNamed(podsA, 'StatefulSet/strata-postgresql-replica');
    const purge = podNamed(podsA, 'CronJob/strata-purge');
    const createJob = podsA.find((p) => p.name.startsWith('Job/strata-redis-cluster-create-'))!;
    expect(net.allows(dataPlane, redis0, 6379)).to.equal(true);
    expect(net.allows(redis1, redis0, 16379)).to.equal(true);
    expect(net.allows(createJob, redis0, 6379)).to.equal(true);
    expect(net.allows(gateway, dataPlane, 9001)).to.equal(true);
    expect(net.allows(replica, postgres, 5432)).to.equal(true);
    expect(net.allows(purge, controlPlane, 9002)).to.equal(true);
    expect(net.allows(appA, gateway, 9000)).to.equal(true);
    expect(net.allows(appA, redis0, 6379)).to.equal(false);
    expect(net.allows(appA, postgres, 5432)).to.equal(false);
    const controller = pod(ingressController.namespace, 'controller', ingressController.podLabels);
    expect(net.allows(controller, gateway, 9000)).to.equal(true);
    expect(net.allows(controller, dataPlane, 9001)).to.equal(false);
    const scraper = pod(prometheus.namespace, 'prometheus', prometheus.podLabels);
    for (const scraped of [gateway, dataPlane, controlPlane]) expect(net.allows(scraper, scraped, scraped.ports[0]!.containerPort)).to.equal(true);
    expect(net.allows(scraper, redis0, 6379)).to.equal(false);
    const operatorPod = pod(operator.namespace, 'operator', operator.podLabels);
    expect(net.allows(operatorPod, controlPlane, 9002)).to.equal(true);
    expect(net.allows(operatorPod, redis0, 6379)).to.equal(false);
  });

  it('gives the two namespaces no credential in common (Redis password included)', () => {
    const a = secretValues(A);
    const b = new Set(secretValues(B));
    expect(a.some((v) => v.length > 0 && b.has(v))).to.equal(false);
    const redisPassword = A.find((o) => o.metadata.name === 'strata-redis-credentials') as unknown as { stringData: Record<string, string> };
    expect(redisPassword.stringData.STRATA_REDIS_PASSWORD).to.have.length.above(30);
    expect(JSON.stringify(A.filter((o) => o.kind !== 'Secret'))).to.not.contain(redisPassword.stringData.STRATA_REDIS_PASSWORD);
  });

  it('renders no NetworkPolicy when they are turned off (a cluster whose network plugin ignores them, or that has its own)', () => {
    const off = renderStorageStack(
      'tenant-a',
      owners('tenant-a'),
      { ...TEST_SETTINGS, networkPolicy: { ...TEST_SETTINGS.networkPolicy, enabled: false } },
      {
        postgresPassword: 'p',
        rabbitmqPassword: 'r',
      },
    );
    expect(off.filter((o) => o.kind === 'NetworkPolicy')).to.deep.equal([]);
  });
});
