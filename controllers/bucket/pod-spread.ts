import type { OwnerReference } from '../api/index.js';
import type { Manifest } from '../support/kube-client.js';
import { standardLabels } from '../support/ownership.js';

/** Prefer a different node for each pod the selector matches: one node drained or lost takes one of them. */
export function spreadByHost(matchLabels: Record<string, string>) {
  return {
    podAntiAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        { weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels } } },
      ],
    },
  };
}

/**
 * Spread a Deployment's replicas evenly over nodes when the scheduler can (ScheduleAnyway: on too few
 * nodes they still run, stacked), as Kubernetes advises for stateless replicas.
 */
export function spreadOverHosts(matchLabels: Record<string, string>) {
  return [{ maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels } }];
}

/**
 * At most one of the selected pods evicted at a time (node drains, cluster autoscaler). maxUnavailable,
 * not minAvailable: a budget over one pod then still lets a drain move it, rather than blocking it forever.
 */
export function disruptionBudget(name: string, namespace: string, matchLabels: Record<string, string>, owners: OwnerReference[]): Manifest {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name, namespace, labels: standardLabels(matchLabels['app.kubernetes.io/name'] ?? name, 'strata'), ownerReferences: owners },
    spec: { maxUnavailable: 1, selector: { matchLabels } },
  };
}
