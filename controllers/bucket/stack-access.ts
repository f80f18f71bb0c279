import type { KubeClient, KubeObject } from '../support/kube-client.js';
import { serviceHost, type OperatorSettings } from '../support/settings.js';
import type { StackAccess } from './bucket-service.js';
import { secretValue } from './stack-secrets.js';
import { STACK } from './stack-names.js';

interface Secret extends KubeObject {
  data?: Record<string, string>;
}
interface Deployment extends KubeObject {
  status?: { readyReplicas?: number };
}

/**
 * How the operator reaches namespace `namespace`'s object store (its control plane's internal API, with
 * the stack's internal token), once its control plane and gateway report ready; undefined before.
 */
export async function stackAccessIfReady(kube: KubeClient, settings: OperatorSettings, namespace: string): Promise<StackAccess | undefined> {
  for (const component of [STACK.controlPlane, STACK.gateway]) {
    const d = await kube.get<Deployment>({ apiVersion: 'apps/v1', kind: 'Deployment', namespace, name: component.name });
    if (!d?.status?.readyReplicas) return undefined;
  }
  const root = await kube.get<Secret>({ apiVersion: 'v1', kind: 'Secret', namespace, name: STACK.rootSecret });
  const internal = await kube.get<Secret>({ apiVersion: 'v1', kind: 'Secret', namespace, name: STACK.internalSecret });
  const rootUser = secretValue(root, 'STRATA_ROOT_USER');
  const internalToken = secretValue(internal, 'STRATA_INTERNAL_TOKEN');
  if (!rootUser || !internalToken) return undefined;
  return {
    namespace,
    controlPlaneUrl: `http://${serviceHost(settings, STACK.controlPlane.name, namespace)}:${STACK.controlPlane.port}`,
    rootUser,
    internalToken,
  };
}
