import { z } from 'zod';

/** The API group and version of every Strata custom resource. */
export const GROUP = 'strata.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** A Kubernetes quantity ("500m", "1Gi" or a plain number), rendered as int-or-string in the CRD. */
export const quantity = z
  .union([z.string().regex(/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i?|[mkMGTPE])?$/), z.number()])
  .meta({ 'x-kubernetes-int-or-string': true });

/** Container resources in the shape of core/v1 ResourceRequirements (requests and limits only). */
export const resourceRequirements = z
  .object({
    requests: z.record(z.string(), quantity).optional(),
    limits: z.record(z.string(), quantity).optional(),
  })
  .describe('CPU and memory requests and limits for the pods, as in a container spec.');

/** Requests and limits the operator sets when a spec gives none (never BestEffort: first evicted, unbounded memory, refused under a quota). */
export function defaultedResources(defaults: { requests: Record<string, string>; limits: Record<string, string> }) {
  const text = (r: Record<string, string>) =>
    Object.entries(r)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  return resourceRequirements
    .optional()
    .describe(
      `CPU and memory requests and limits for the pods, as in a container spec. Unset: requests ${text(defaults.requests)}; limits ${text(defaults.limits)}.`,
    );
}

export const toleration = z.object({
  key: z.string().optional(),
  operator: z.enum(['Exists', 'Equal']).optional(),
  value: z.string().optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
  tolerationSeconds: z.number().int().optional(),
});
export type Toleration = z.infer<typeof toleration>;

/**
 * A GPU request. When enabled the pods get an `nvidia.com/gpu` limit, a node selector for GPU nodes
 * and a toleration for the usual GPU taint (both overridable).
 */
export const gpuRequest = z
  .object({
    enabled: z.boolean().default(false).describe('Schedule the pods on GPU nodes with a GPU limit.'),
    count: z.number().int().min(1).max(16).default(1).describe('GPUs per pod.'),
    resourceName: z.string().default('nvidia.com/gpu').describe('Extended resource that counts GPUs.'),
    nodeSelector: z.record(z.string(), z.string()).optional().describe('Defaults to nvidia.com/gpu.present=true.'),
    tolerations: z.array(toleration).optional().describe('Defaults to tolerating the nvidia.com/gpu taint.'),
  })
  .describe('GPU scheduling for the pods.');
export type GpuRequest = z.infer<typeof gpuRequest>;

/** A key in a Secret of the same namespace. */
export const secretKeyRef = z.object({
  name: z.string().min(1).describe('Secret name in the same namespace.'),
  key: z.string().min(1).describe('Key inside the Secret.'),
});
export type SecretKeyRef = z.infer<typeof secretKeyRef>;

/** One metav1.Condition. */
export const condition = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.number().int().optional(),
  lastTransitionTime: z.string(),
  reason: z.string(),
  message: z.string(),
});
export type Condition = z.infer<typeof condition>;

/** Fields every Strata status carries. */
export const commonStatus = {
  observedGeneration: z.number().int().optional().describe('The metadata.generation the status describes.'),
  conditions: z
    .array(condition)
    // One entry per type, merged by type (server-side apply and kubectl treat it as a map).
    .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] })
    .optional()
    .describe('Ready, Progressing and Degraded.'),
};

/** Object metadata as the reconcilers read it. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  deletionTimestamp?: string | Date;
  ownerReferences?: OwnerReference[];
  creationTimestamp?: string | Date;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A custom resource as stored: metadata plus a typed spec and status. */
export interface CustomResource<Spec, Status> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}
