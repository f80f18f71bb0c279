import type { RequestAttributes } from '../../support/fake-kube/index.js';
import type { RenderedObject } from './helm.js';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

export const OPERATOR_TOKEN = 'strata-operator-sa';
export const RELEASE_NAMESPACE = 'strata-system';

/** An RBAC authorizer over the chart's rendered Roles and ClusterRoles (all bound to the operator's ServiceAccount). */
export function authorizerFrom(objs: RenderedObject[]): (user: string, attrs: RequestAttributes) => boolean {
  const grants = objs
    .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
    .map((o) => ({ namespace: o.kind === 'Role' ? o.metadata.namespace : undefined, rules: o.rules as Rule[] }));
  return (user, attrs) => {
    if (user !== OPERATOR_TOKEN) return true; // the test itself acts as cluster admin
    const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
    return grants.some(
      (g) =>
        (g.namespace === undefined || g.namespace === attrs.namespace) &&
        g.rules.some((r) => r.apiGroups.includes(attrs.group) && r.resources.includes(resource) && r.verbs.includes(attrs.verb)),
    );
  };
}
