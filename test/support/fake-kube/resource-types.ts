/** One REST resource the fake API server serves (what discovery reports about it). */
export interface ResourceType {
  group: string;
  version: string;
  kind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  /** Has a /status subresource: the main endpoint ignores status, /status ignores everything else. */
  statusSubresource: boolean;
  shortNames?: string[];
}

const core = (kind: string, plural: string, namespaced = true, statusSubresource = false): ResourceType => ({
  group: '',
  version: 'v1',
  kind,
  plural,
  singular: kind.toLowerCase(),
  namespaced,
  statusSubresource,
});
const grouped = (group: string, version: string, kind: string, plural: string, statusSubresource = true, namespaced = true): ResourceType => ({
  group,
  version,
  kind,
  plural,
  singular: kind.toLowerCase(),
  namespaced,
  statusSubresource,
});

/** The built-in kinds Strata's operator and tests touch. */
export const BUILTIN_TYPES: ResourceType[] = [
  core('Namespace', 'namespaces', false, true),
  core('ConfigMap', 'configmaps'),
  core('Secret', 'secrets'),
  core('Service', 'services', true, true),
  core('ServiceAccount', 'serviceaccounts'),
  core('PersistentVolumeClaim', 'persistentvolumeclaims', true, true),
  core('Pod', 'pods', true, true),
  core('Event', 'events'),
  grouped('apps', 'v1', 'Deployment', 'deployments'),
  grouped('apps', 'v1', 'StatefulSet', 'statefulsets'),
  grouped('batch', 'v1', 'Job', 'jobs'),
  grouped('batch', 'v1', 'CronJob', 'cronjobs'),
  grouped('coordination.k8s.io', 'v1', 'Lease', 'leases', false),
  grouped('networking.k8s.io', 'v1', 'Ingress', 'ingresses'),
  grouped('networking.k8s.io', 'v1', 'NetworkPolicy', 'networkpolicies', false),
  grouped('policy', 'v1', 'PodDisruptionBudget', 'poddisruptionbudgets'),
  grouped('rbac.authorization.k8s.io', 'v1', 'Role', 'roles', false),
  grouped('rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings', false),
  grouped('rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', false, false),
  grouped('rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', false, false),
  grouped('apiextensions.k8s.io', 'v1', 'CustomResourceDefinition', 'customresourcedefinitions', true, false),
];

export function apiVersionOf(t: ResourceType): string {
  return t.group ? `${t.group}/${t.version}` : t.version;
}

/** The resource types a CustomResourceDefinition object declares (one per served version). */
export function typesFromCrd(crd: {
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string; singular?: string; shortNames?: string[] };
    versions: Array<{ name: string; served?: boolean; subresources?: { status?: object } }>;
  };
}): ResourceType[] {
  const { group, names, scope } = crd.spec;
  return crd.spec.versions
    .filter((v) => v.served !== false)
    .map((v) => ({
      group,
      version: v.name,
      kind: names.kind,
      plural: names.plural,
      singular: names.singular ?? names.kind.toLowerCase(),
      namespaced: scope === 'Namespaced',
      statusSubresource: Boolean(v.subresources?.status),
      shortNames: names.shortNames,
    }));
}
