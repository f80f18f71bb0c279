import type { ModelServer, ModelServerSpec } from '../api/index.js';
import { gpuPlacement, gpuScheduling } from '../support/gpu.js';
import type { Manifest } from '../support/kube-client.js';
import { controllerRef, scrapeAnnotations, standardLabels } from '../support/ownership.js';
import { imageFor, serviceHost, type OperatorSettings } from '../support/settings.js';
import { RESTRICTED_CONTAINER_SECURITY, SERVICE_UID, restrictedPodSecurity } from '../support/pod-security.js';

/** Name of the Deployment and Service of a ModelServer. */
export function modelServerWorkloadName(ms: ModelServer): string {
  return `${ms.metadata.name}-model-server`;
}

export function modelServerEndpoint(ms: ModelServer, spec: ModelServerSpec, settings: OperatorSettings): string {
  return `http://${serviceHost(settings, modelServerWorkloadName(ms), ms.metadata.namespace ?? 'default')}:${spec.port}/v1`;
}

/** The Deployment and Service that run a ModelServer (pure: same input, same output). */
export function renderModelServer(ms: ModelServer, spec: ModelServerSpec, settings: OperatorSettings): Manifest[] {
  const name = modelServerWorkloadName(ms);
  const namespace = ms.metadata.namespace;
  const labels = standardLabels('model-server', ms.metadata.name);
  const selector = { 'app.kubernetes.io/name': 'model-server', 'app.kubernetes.io/instance': ms.metadata.name };
  const owner = [controllerRef(ms)];
  const gpu = gpuScheduling(spec.gpu, spec.resources as never);
  const probe = (path: string, failureThreshold: number) => ({
    httpGet: { path, port: 'http' },
    periodSeconds: 10,
    timeoutSeconds: 3,
    failureThreshold,
  });
  const deployment: Manifest = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels, ownerReferences: owner },
    spec: {
      replicas: spec.replicas,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels, annotations: scrapeAnnotations(spec.port) },
        spec: {
          securityContext: restrictedPodSecurity(SERVICE_UID),
          ...gpuPlacement(gpu),
          containers: [
            {
              name: 'model-server',
              image: spec.image ?? imageFor(settings, 'model-server', spec.gpu.enabled ? 'gpu' : 'cpu'),
              imagePullPolicy: settings.imagePullPolicy,
              ports: [{ name: 'http', containerPort: spec.port, protocol: 'TCP' }],
              env: [
                { name: 'PORT', value: String(spec.port) },
                { name: 'MODEL_NAMES', value: spec.model.name },
                ...(spec.model.path ? [{ name: 'MODEL_DIR', value: spec.model.path }] : []),
                ...(spec.gpu.enabled ? [{ name: 'STRATA_EXECUTION_PROVIDER', value: 'cuda' }] : []),
                ...(spec.truncatePrompt ? [{ name: 'MODEL_SERVER_TRUNCATE_PROMPT', value: 'true' }] : []),
              ],
              resources: gpu.resources,
              startupProbe: probe('/healthz', 30),
              livenessProbe: probe('/healthz', 3),
              readinessProbe: probe('/readyz', 3),
              securityContext: RESTRICTED_CONTAINER_SECURITY,
            },
          ],
        },
      },
    },
  };
  const service: Manifest = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, labels, ownerReferences: owner },
    spec: {
      type: 'ClusterIP',
      selector,
      ports: [{ name: 'http', port: spec.port, targetPort: 'http', protocol: 'TCP' }],
    },
  };
  return [deployment, service];
}
