import type { GpuRequest, OwnerReference, Toleration } from '../api/index.js';
import type { Manifest } from './kube-client.js';
import { scrapeAnnotations } from './ownership.js';
import { RESTRICTED_CONTAINER_SECURITY, SERVICE_UID, restrictedPodSecurity } from './pod-security.js';
import { imageFor, type OperatorSettings } from './settings.js';

export const DEFAULT_GPU_NODE_SELECTOR = { 'nvidia.com/gpu.present': 'true' };
export const DEFAULT_GPU_TOLERATIONS: Toleration[] = [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }];

interface Resources {
  requests?: Record<string, string | number>;
  limits?: Record<string, string | number>;
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

/** The container of a service that may run on a GPU (image-search's index worker, the model server). */
export interface GpuServiceContainer {
  /** The image's name, and the container's. */
  component: string;
  port: number;
  /** After PORT. */
  env: object[];
  /** The pods' requests and limits when the spec gives none. */
  defaultResources: Resources;
  /** Probes of /healthz before the service counts as started (model loading takes a while). */
  startupFailureThreshold: number;
  volumeMounts?: object[];
  volumes?: object[];
}

/**
 * The pod template of such a service: restricted security, scraped on its port, scheduled where its
 * GPU request needs (and limited to it), the spec's resources or the service's defaults, the spec's image
 * or the operator's cpu or gpu variant.
 */
export function gpuServicePodTemplate(
  labels: Record<string, string>,
  spec: { image?: string; gpu: GpuRequest; resources?: unknown },
  settings: OperatorSettings,
  c: GpuServiceContainer,
) {
  const gpu = gpuScheduling(spec.gpu, (spec.resources as Resources | undefined) ?? c.defaultResources);
  const probe = (path: string, failureThreshold: number) => ({ httpGet: { path, port: 'http' }, periodSeconds: 10, timeoutSeconds: 3, failureThreshold });
  return {
    metadata: { labels, annotations: scrapeAnnotations(c.port) },
    spec: {
      securityContext: restrictedPodSecurity(SERVICE_UID),
      ...(gpu.nodeSelector ? { nodeSelector: gpu.nodeSelector } : {}),
      ...(gpu.tolerations ? { tolerations: gpu.tolerations } : {}),
      containers: [
        {
          name: c.component,
          image: spec.image ?? imageFor(settings, c.component, spec.gpu.enabled ? 'gpu' : 'cpu'),
          imagePullPolicy: settings.imagePullPolicy,
          ports: [{ name: 'http', containerPort: c.port, protocol: 'TCP' }],
          env: [{ name: 'PORT', value: String(c.port) }, ...c.env],
          resources: gpu.resources,
          startupProbe: probe('/healthz', c.startupFailureThreshold),
          livenessProbe: probe('/healthz', 3),
          readinessProbe: probe('/readyz', 3),
          ...(c.volumeMounts ? { volumeMounts: c.volumeMounts } : {}),
          securityContext: RESTRICTED_CONTAINER_SECURITY,
        },
      ],
      ...(c.volumes ? { volumes: c.volumes } : {}),
    },
  };
}

/** A ClusterIP Service for the pods' `http` port. */
export function httpService(
  meta: { name: string; namespace?: string; labels: Record<string, string>; ownerReferences: OwnerReference[] },
  selector: Record<string, string>,
  port: number,
): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta,
    spec: { type: 'ClusterIP', selector, ports: [{ name: 'http', port, targetPort: 'http', protocol: 'TCP' }] },
  };
}
