import type { RequestAttributes } from '../../support/fake-kube/index.js';
import type { RenderedObject } from './helm.js';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

interface Binding {
  metadata: { name: string; namespace?: string };
  roleRef: { kind: 'Role' | 'ClusterRole'; name: string };
  subjects: Array<{ kind: string; name: string; namespace?: string }>;
}

export const OPERATOR_TOKEN = 'strata-operator-sa';
export const RELEASE_NAMESPACE = 'strata-system';
/** The ServiceAccount the chart runs the operator as (the subject its bindings must name). */
const OPERATOR_ACCOUNT = { name: 'strata-operator', namespace: RELEASE_NAMESPACE };

/**
 * Kubernetes RBAC over the chart's rendered roles and bindings, for the operator's ServiceAccount: a
 * ClusterRoleBinding grants its ClusterRole everywhere, a RoleBinding grants its Role or ClusterRole
 * in the binding's namespace only. A rule with resourceNames matches only requests naming one of
 * them (so never create, list or watch, which name no object), as the API server's authorizer does.
 */
export function authorizerFrom(objs: RenderedObject[]): (user: string, attrs: RequestAttributes) => boolean {
  const roles = new Map(objs.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role').map((o) => [`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`, o.rules as Rule[]]));
  const grants = (objs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding') as unknown as Array<Binding & { kind: string }>)
    .filter((b) => b.subjects.some((s) => s.kind === 'ServiceAccount' && s.name === OPERATOR_ACCOUNT.name && s.namespace === OPERATOR_ACCOUNT.namespace))
    .map((b) => {
      const namespace = b.kind === 'RoleBinding' ? b.metadata.namespace : undefined;
      const rules = roles.get(`${b.roleRef.kind}/${b.roleRef.kind === 'Role' ? (namespace ?? '') : ''}/${b.roleRef.name}`);
      if (!rules) throw new Error(`${b.kind} ${b.metadata.name} refers to ${b.roleRef.kind} ${b.roleRef.name}, which the chart does not render`);
      return { namespace, rules };
    });
  return (user, attrs) => {
    if (user !== OPERATOR_TOKEN) return true; // the test itself acts as cluster admin
    const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
    return grants.some(
      (g) =>
        (g.namespace === undefined || g.namespace === attrs.namespace) &&
        g.rules.some(
          (r) =>
            r.apiGroups.includes(attrs.group) &&
            r.resources.includes(resource) &&
            r.verbs.includes(attrs.verb) &&
            (r.resourceNames === undefined || (attrs.name !== undefined && r.resourceNames.includes(attrs.name))),
        ),
    );
  };
}
