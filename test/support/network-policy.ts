/**
 * Kubernetes NetworkPolicy semantics (ingress), evaluated over pods known by their namespace, labels
 * and container ports: what a conforming network plugin enforces. A pod no Ingress policy of its
 * namespace selects admits everything; a selected pod admits a connection only when some selecting
 * policy has an ingress rule whose peers include the source and whose ports include the port. A peer
 * with a podSelector alone means pods of the policy's namespace; with a namespaceSelector alone every
 * pod of the matching namespaces; with both, the matching pods of the matching namespaces. ipBlock
 * peers match no pod (they are for addresses outside the cluster).
 */

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

export interface PolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: object;
}

export interface NetworkPolicy {
  metadata: { name: string; namespace: string };
  spec: {
    podSelector: LabelSelector;
    policyTypes?: string[];
    ingress?: Array<{ from?: PolicyPeer[]; ports?: Array<{ protocol?: string; port?: number | string; endPort?: number }> }>;
  };
}

export interface PodInfo {
  name: string;
  namespace: string;
  labels: Record<string, string>;
  /** Container ports by name (named ports in policies resolve through them). */
  ports: Array<{ name?: string; containerPort: number; protocol?: string }>;
}

/** An empty selector selects everything; a missing one (undefined) too, where the API allows it. */
export function selects(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return true;
  const exact = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return (
    exact &&
    (selector.matchExpressions ?? []).every((e) => {
      const has = Object.hasOwn(labels, e.key);
      switch (e.operator) {
        case 'In':
          return has && (e.values ?? []).includes(labels[e.key]!);
        case 'NotIn':
          return !has || !(e.values ?? []).includes(labels[e.key]!);
        case 'Exists':
          return has;
        case 'DoesNotExist':
          return !has;
        default:
          throw new Error(`unknown selector operator ${String(e.operator)}`);
      }
    })
  );
}

function isIngressPolicy(p: NetworkPolicy): boolean {
  // Without policyTypes, a policy is an Ingress policy (and Egress only if it has egress rules).
  return p.spec.policyTypes ? p.spec.policyTypes.includes('Ingress') : true;
}

export class NetworkPolicyEvaluator {
  constructor(
    private readonly policies: NetworkPolicy[],
    /** Namespace name → its labels (kubernetes.io/metadata.name is added, as the API server does). */
    private readonly namespaceLabels: Record<string, Record<string, string>>,
  ) {}

  private nsLabels(ns: string): Record<string, string> {
    return { ...(this.namespaceLabels[ns] ?? {}), 'kubernetes.io/metadata.name': ns };
  }

  private peerMatches(peer: PolicyPeer, policyNamespace: string, from: PodInfo): boolean {
    if (peer.ipBlock) return false;
    const nsOk = peer.namespaceSelector ? selects(peer.namespaceSelector, this.nsLabels(from.namespace)) : from.namespace === policyNamespace;
    return nsOk && selects(peer.podSelector, from.labels);
  }

  private portMatches(rulePort: { protocol?: string; port?: number | string; endPort?: number }, to: PodInfo, port: number): boolean {
    const protocol = rulePort.protocol ?? 'TCP';
    if (protocol !== 'TCP') return false;
    if (rulePort.port === undefined) return true;
    if (typeof rulePort.port === 'number') return rulePort.endPort ? port >= rulePort.port && port <= rulePort.endPort : port === rulePort.port;
    return to.ports.some((p) => p.name === rulePort.port && p.containerPort === port && (p.protocol ?? 'TCP') === 'TCP');
  }

  /** Whether a TCP connection from `from` to `to` on `port` is admitted. */
  allows(from: PodInfo, to: PodInfo, port: number): boolean {
    const selecting = this.policies.filter((p) => p.metadata.namespace === to.namespace && isIngressPolicy(p) && selects(p.spec.podSelector, to.labels));
    if (selecting.length === 0) return true;
    return selecting.some((p) =>
      (p.spec.ingress ?? []).some(
        (rule) =>
          (rule.from === undefined || rule.from.length === 0 || rule.from.some((peer) => this.peerMatches(peer, p.metadata.namespace, from))) &&
          (rule.ports === undefined || rule.ports.length === 0 || rule.ports.some((rp) => this.portMatches(rp, to, port))),
      ),
    );
  }
}

/** The pods rendered workloads run (Deployments, StatefulSets, Jobs, CronJobs), one per template. */
export function podsOf(objects: Array<{ kind: string; metadata: { name: string; namespace?: string }; spec?: unknown }>): PodInfo[] {
  const out: PodInfo[] = [];
  for (const o of objects) {
    const spec = o.spec as { template?: PodTemplate; jobTemplate?: { spec: { template: PodTemplate } } } | undefined;
    const template =
      o.kind === 'CronJob' ? spec?.jobTemplate?.spec.template : ['Deployment', 'StatefulSet', 'Job'].includes(o.kind) ? spec?.template : undefined;
    if (!template) continue;
    out.push({
      name: `${o.kind}/${o.metadata.name}`,
      namespace: o.metadata.namespace!,
      labels: template.metadata?.labels ?? {},
      ports: template.spec.containers.flatMap((c) => c.ports ?? []),
    });
  }
  return out;
}

interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: { containers: Array<{ ports?: PodInfo['ports'] }> };
}
