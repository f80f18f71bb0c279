import type { OwnerReference } from '../api/index.js';
import type { KubeObject } from './kube-client.js';

export const MANAGED_BY = 'strata-operator';
/** Selects what the operator created; the informers of owned kinds watch only these. */
export const MANAGED_SELECTOR = `app.kubernetes.io/managed-by=${MANAGED_BY}`;

/** Pod annotations that have Prometheus scrape /metrics on the port. */
export function scrapeAnnotations(port: number): Record<string, string> {
  return { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(port), 'prometheus.io/path': '/metrics' };
}

/** Labels every object the operator creates carries (the operator's informers select on managed-by). */
export function standardLabels(component: string, instance: string): Record<string, string> {
  return {
    'app.kubernetes.io/name': component,
    'app.kubernetes.io/instance': instance,
    'app.kubernetes.io/part-of': 'strata',
    'app.kubernetes.io/managed-by': MANAGED_BY,
  };
}

/** The owner reference that makes `owner` the controller of a dependent (garbage collected with it). */
export function controllerRef(owner: KubeObject): OwnerReference {
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Plain owner references (no controller): the dependent lives while any owner does. */
export function sharedOwnerRefs(owners: KubeObject[]): OwnerReference[] {
  return [...owners]
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
    .map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name, uid: o.metadata.uid ?? '' }));
}

/** Status merge patch that also clears fields the new status no longer has. */
export function statusPatch(previous: object | undefined, next: object): Record<string, unknown> {
  const patch: Record<string, unknown> = { ...next };
  for (const key of Object.keys(previous ?? {})) if (!(key in next)) patch[key] = null;
  return patch;
}

export function isBeingDeleted(obj: KubeObject): boolean {
  return Boolean(obj.metadata.deletionTimestamp);
}
