import type { GpuRequest, Toleration } from '../api/index.js';

export const DEFAULT_GPU_NODE_SELECTOR = { 'nvidia.com/gpu.present': 'true' };
export const DEFAULT_GPU_TOLERATIONS: Toleration[] = [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }];

interface Resources {
  requests?: Record<string, string | number>;
  limits?: Record<string, string | number>;
}

/** The pod spec's nodeSelector and tolerations from gpuScheduling, where it set them. */
export function gpuPlacement(scheduling: { nodeSelector?: Record<string, string>; tolerations?: Toleration[] }) {
  return {
    ...(scheduling.nodeSelector ? { nodeSelector: scheduling.nodeSelector } : {}),
    ...(scheduling.tolerations ? { tolerations: scheduling.tolerations } : {}),
  };
}

/** Pod scheduling fields for a GPU request: the GPU limit, node selector and tolerations (or nothing). */
export function gpuScheduling(gpu: GpuRequest | undefined, resources: Resources | undefined) {
  const base: Resources = {
    ...(resources?.requests ? { requests: { ...resources.requests } } : {}),
    ...(resources?.limits ? { limits: { ...resources.limits } } : {}),
  };
  if (!gpu?.enabled) return { resources: base, nodeSelector: undefined, tolerations: undefined };
  // Extended resources are limits (requests default to them); a GPU is never shared between pods.
  return {
    resources: { ...base, limits: { ...(base.limits ?? {}), [gpu.resourceName]: gpu.count } },
    nodeSelector: gpu.nodeSelector ?? DEFAULT_GPU_NODE_SELECTOR,
    tolerations: gpu.tolerations ?? DEFAULT_GPU_TOLERATIONS,
  };
}
