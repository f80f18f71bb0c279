import { API_VERSION, MODEL_SERVER_KIND, modelServerSpec, type ModelServer } from '../api/index.js';
import type { EventRecorder, KubeClient, KubeObject } from '../support/kube-client.js';
import { isBeingDeleted } from '../support/ownership.js';
import { OWNED, type ReconcileRequest, type ReconcileResult, type Reconciler } from '../support/reconciler.js';
import type { OperatorSettings } from '../support/settings.js';
import { applyOwned } from '../support/apply.js';
import { checkedSpec, writeStatus } from '../support/status-writer.js';
import { modelServerEndpoint, modelServerWorkloadName, renderModelServer } from './render-model-server.js';

interface DeploymentStatus extends KubeObject {
  status?: {
    replicas?: number;
    readyReplicas?: number;
    updatedReplicas?: number;
    observedGeneration?: number;
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
  };
}

/** ModelServer → Deployment + Service; status mirrors the Deployment's ready replicas. */
export class ModelServerReconciler implements Reconciler {
  readonly name = 'modelserver';
  readonly primary = { apiVersion: API_VERSION, kind: MODEL_SERVER_KIND.kind, plural: MODEL_SERVER_KIND.plural };
  readonly owns = [OWNED.deployment, OWNED.service];

  constructor(
    private readonly kube: KubeClient,
    private readonly events: EventRecorder,
    private readonly settings: OperatorSettings,
  ) {}

  async reconcile({ namespace, name }: ReconcileRequest): Promise<ReconcileResult> {
    const ms = await this.kube.get<ModelServer>({ ...this.primary, namespace, name });
    // Gone, or going: the garbage collector removes what it owns.
    if (!ms || isBeingDeleted(ms)) return {};
    const spec = await checkedSpec(this.kube, this.events, ms, modelServerSpec, MODEL_SERVER_KIND);
    if (!spec) return {};
    await applyOwned(this.kube, this.events, ms, renderModelServer(ms, spec, this.settings), {
      replicas: spec.replicas,
      endpoint: modelServerEndpoint(ms, spec, this.settings),
    });

    const deployment = await this.kube.get<DeploymentStatus>({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      namespace,
      name: modelServerWorkloadName(ms),
    });
    const ready = deployment?.status?.readyReplicas ?? 0;
    const rolledOut = ready >= spec.replicas && (deployment?.status?.observedGeneration ?? 0) >= (deployment?.metadata.generation ?? 0);
    // The Deployment controller gives up on a rollout after its progress deadline (pods crash, an
    // image cannot be pulled, no node has the GPU): that is Degraded, not Progressing.
    const stalled = deployment?.status?.conditions?.find((c) => c.type === 'Progressing' && c.status === 'False' && c.reason === 'ProgressDeadlineExceeded');
    await writeStatus(this.kube, this.events, ms, {
      fields: { replicas: spec.replicas, readyReplicas: ready, endpoint: modelServerEndpoint(ms, spec, this.settings) },
      state: rolledOut ? 'ready' : stalled ? 'degraded' : 'progressing',
      reason: rolledOut ? 'ReplicasReady' : stalled ? 'RolloutStalled' : 'RollingOut',
      message: `${ready}/${spec.replicas} replicas ready${!rolledOut && stalled?.message ? `: ${stalled.message}` : ''}`,
    });
    // The Deployment's own status changes wake us up; the requeue is a safety net.
    return rolledOut ? {} : { requeueAfterMs: 30_000 };
  }
}
