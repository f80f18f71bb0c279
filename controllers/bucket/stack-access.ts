import type { KubeClient, KubeObject } from '../support/kube-client.js';
import { serviceHost, type OperatorSettings } from '../support/settings.js';
import type { StackAccess } from './bucket-service.js';
import { secretValue } from './stack-secrets.js';
import { STACK } from './stack-names.js';

interface Secret extends KubeObject {
  data?: Record<string, string>;
}
interface Deployment extends KubeObject {
  spec?: { replicas?: number; template?: { spec?: { volumes?: Array<{ persistentVolumeClaim?: { claimName?: string } }> } } };
  status?: { readyReplicas?: number; replicas?: number; updatedReplicas?: number };
}

/**
 * Whether the namespace's data plane is one replica on the data volume and no pod of an older template
 * (several data planes without the volume) is left: only then may an fs bucket take writes. A
 * Deployment the controller has not reported on yet has no pods, so none of an older template either.
 */
export async function dataPlaneOnVolume(kube: KubeClient, namespace: string): Promise<boolean> {
  const d = await kube.get<Deployment>({ apiVersion: 'apps/v1', kind: 'Deployment', namespace, name: STACK.dataPlane.name });
  if (!d || (d.spec?.replicas ?? 1) > 1) return false;
  if (!d.spec?.template?.spec?.volumes?.some((v) => v.persistentVolumeClaim?.claimName === STACK.dataVolume)) return false;
  // A status the controller has not brought up to the newest generation still counts the pods that
  // run: several (of a template without the volume) are refused by their number, so a lagging status
  // or an edit to 0 replicas (drift, undone by the next apply) does not turn a ready bucket back.
  const s = d.status;
  if (!s) return true;
  return (s.replicas ?? 0) <= 1 && (s.updatedReplicas ?? 0) === (s.replicas ?? 0);
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
