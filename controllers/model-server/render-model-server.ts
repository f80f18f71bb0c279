import { MODEL_SERVER_DEFAULT_RESOURCES, type ModelServer, type ModelServerSpec } from '../api/index.js';
import { gpuServicePodTemplate, httpService } from '../support/gpu.js';
import type { Manifest } from '../support/kube-client.js';
import { controllerRef, standardLabels } from '../support/ownership.js';
import { serviceHost, type OperatorSettings } from '../support/settings.js';

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
  const meta = { name, namespace, labels, ownerReferences: owner };
  const deployment: Manifest = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta,
    spec: {
      replicas: spec.replicas,
      selector: { matchLabels: selector },
      template: gpuServicePodTemplate(labels, spec, settings, {
        component: 'model-server',
        port: spec.port,
        env: [
          { name: 'MODEL_NAMES', value: spec.model.name },
          ...(spec.model.path ? [{ name: 'MODEL_DIR', value: spec.model.path }] : []),
          ...(spec.gpu.enabled ? [{ name: 'STRATA_EXECUTION_PROVIDER', value: 'cuda' }] : []),
          // Always stated: the server's own default could differ from the spec's.
          { name: 'MODEL_SERVER_TRUNCATE_PROMPT', value: String(spec.truncatePrompt) },
        ],
        defaultResources: MODEL_SERVER_DEFAULT_RESOURCES,
        startupFailureThreshold: 30,
      }),
    },
  };
  const service = httpService({ ...meta }, selector, spec.port);
  return [deployment, service];
}
