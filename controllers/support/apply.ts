import type { Condition } from '../api/index.js';
import { refOf, type EventRecorder, type KubeClient, type KubeObject, type Manifest } from './kube-client.js';
import { writeStatus } from './status-writer.js';

interface ClaimSpec {
  storageClassName?: string;
  resources?: { requests?: { storage?: string } };
}

const UNITS: Record<string, number> = { '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50 };

/** Bytes of a storage quantity ("20Gi"); NaN when it is not one. */
export function storageBytes(quantity: string | undefined): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|[kMGTP]i?)?$/.exec(quantity ?? '');
  return m ? Number(m[1]) * UNITS[m[2] ?? '']! : Number.NaN;
}

/**
 * A claim as it may be applied over the live one: its storage class is set once (the live one stays),
 * and its size only grows (a smaller request keeps the live size). The API server refuses both changes.
 */
export function claimForApply(desired: Manifest, live: KubeObject | undefined): Manifest {
  const liveSpec = (live as { spec?: ClaimSpec } | undefined)?.spec;
  if (!liveSpec) return desired;
  const spec = { ...(desired.spec as ClaimSpec) };
  if (liveSpec.storageClassName !== undefined) spec.storageClassName = liveSpec.storageClassName;
  else delete spec.storageClassName;
  const liveSize = liveSpec.resources?.requests?.storage;
  if (storageBytes(liveSize) > storageBytes(spec.resources?.requests?.storage))
    spec.resources = { ...spec.resources, requests: { ...spec.resources?.requests, storage: liveSize } };
  return { ...desired, spec };
}

/**
 * Apply what a resource renders; claims through claimForApply. What the API server refuses shows in
 * the resource's status (Degraded, with the API server's message) before the error goes on to the
 * manager's backoff, so that `kubectl get` tells what the log tells.
 */
export async function applyOwned<S extends { conditions?: Condition[]; observedGeneration?: number }>(
  kube: KubeClient,
  events: EventRecorder,
  owner: KubeObject & { status?: S },
  objects: Manifest[],
  statusFields: Omit<S, 'conditions' | 'observedGeneration'>,
): Promise<void> {
  try {
    for (const obj of objects) {
      await kube.apply(obj.kind === 'PersistentVolumeClaim' && obj.apiVersion === 'v1' ? claimForApply(obj, await kube.get(refOf(obj))) : obj);
    }
  } catch (err) {
    await writeStatus(kube, events, owner, { fields: statusFields, state: 'degraded', reason: 'ApplyFailed', message: (err as Error).message });
    throw err;
  }
}

/** How long a resource has been not Ready (progressing or degraded), from its Ready condition. */
export function notReadyForMs(conditions: Condition[] | undefined, now = Date.now()): number {
  const ready = conditions?.find((c) => c.type === 'Ready');
  if (!ready || ready.status === 'True') return 0;
  return now - new Date(ready.lastTransitionTime).getTime();
}
