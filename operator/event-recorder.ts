import { randomBytes } from 'node:crypto';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../images/service-kit/src/index.js';
import type { EventRecorder, KubeObject } from '../controllers/support/kube-client.js';
import { timedConfiguration } from './api-configuration.js';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './kube-client.js';

/** Writes core/v1 Events about the operator's resources; a failed event is logged, never fatal. */
export class KubeEventRecorder implements EventRecorder {
  private readonly core: CoreV1Api;

  constructor(
    kc: KubeConfig,
    private readonly logger: Logger,
    private readonly component = 'strata-operator',
    requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS,
  ) {
    this.core = new CoreV1Api(timedConfiguration(kc, requestTimeoutMs));
  }

  async event(about: KubeObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const namespace = about.metadata.namespace ?? 'default';
    const now = new Date();
    try {
      await this.core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name: `${about.metadata.name}.${randomBytes(8).toString('hex')}`, namespace },
          involvedObject: {
            apiVersion: about.apiVersion,
            kind: about.kind,
            name: about.metadata.name,
            namespace,
            uid: about.metadata.uid,
            resourceVersion: about.metadata.resourceVersion,
          },
          type,
          reason,
          message,
          count: 1,
          firstTimestamp: now,
          lastTimestamp: now,
          source: { component: this.component },
          reportingComponent: this.component,
        },
      });
    } catch (err) {
      this.logger.warn({ err, reason, object: `${namespace}/${about.metadata.name}` }, 'could not record event');
    }
  }
}
