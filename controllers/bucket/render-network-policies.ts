import type { OwnerReference } from '../api/index.js';
import type { Manifest } from '../support/kube-client.js';
import { MANAGED_BY, standardLabels } from '../support/ownership.js';
import type { NetworkPolicySettings, PeerSettings } from '../support/settings.js';

/** The stack's servers only its own pods talk to. */
const INTERNAL_COMPONENTS = ['data-plane', 'control-plane', 'redis', 'postgresql', 'rabbitmq'];
/** The stack's services that serve /metrics on their http port. */
const SCRAPED_COMPONENTS = ['gateway', 'data-plane', 'control-plane'];

const inComponents = (components: string[]) => ({
  matchLabels: { 'app.kubernetes.io/part-of': 'strata', 'app.kubernetes.io/managed-by': MANAGED_BY },
  matchExpressions: [{ key: 'app.kubernetes.io/name', operator: 'In', values: components }],
});

/** Pods of another namespace: by the namespace's name (the label every namespace carries) and pod labels. */
const peerIn = (peer: PeerSettings) => ({
  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': peer.namespace } },
  podSelector: { matchLabels: peer.podLabels },
});

/**
 * The stack's ingress, sealed off (Kubernetes NetworkPolicy, enforced by the cluster's network plugin).
 * Selecting a pod makes every ingress not admitted here refused, so:
 * - the internal servers (data plane, control plane, Redis, PostgreSQL, RabbitMQ) admit only the pods the
 *   operator made in this namespace: another namespace's pods never reach them, passwords or not;
 * - the gateway (the S3 endpoint, authenticated) admits the namespace's own pods and the ingress controller;
 * - the control plane admits the operator (its internal API: buckets of Bucket resources);
 * - the services' http ports admit Prometheus (their /metrics).
 * Pods run by CloudNativePG or the RabbitMQ operator are theirs to seal (their operators reach them).
 */
export function renderNetworkPolicies(namespace: string, owners: OwnerReference[], settings: NetworkPolicySettings): Manifest[] {
  if (!settings.enabled) return [];
  const policy = (name: string, podSelector: object, ingress: object[]): Manifest => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace, labels: standardLabels('network-policy', 'strata'), ownerReferences: owners },
    spec: { podSelector, policyTypes: ['Ingress'], ingress },
  });
  const http = [{ protocol: 'TCP', port: 'http' }];
  return [
    policy('strata-internal', inComponents(INTERNAL_COMPONENTS), [
      { from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/managed-by': MANAGED_BY } } }] },
    ]),
    policy('strata-gateway', inComponents(['gateway']), [{ from: [{ podSelector: {} }, peerIn(settings.ingressController)], ports: http }]),
    policy('strata-operator-access', inComponents(['control-plane']), [{ from: [peerIn(settings.operator)], ports: http }]),
    policy('strata-metrics', inComponents(SCRAPED_COMPONENTS), [{ from: [peerIn(settings.prometheus)], ports: http }]),
  ];
}
