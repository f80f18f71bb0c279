/** A namespaced object key a controller's work queue carries. */
export interface ReconcileRequest {
  namespace: string;
  name: string;
}

/** What a reconcile asks of the manager afterwards. An error thrown means "retry with backoff". */
export interface ReconcileResult {
  /** Reconcile again after this long even when nothing changes (polling external state). */
  requeueAfterMs?: number;
}

/** A kind the controller watches, besides its own custom resource. */
export interface WatchedKind {
  apiVersion: string;
  kind: string;
  /** REST path segment (plural), for the watch URL. */
  plural: string;
}

function owned(apiVersion: string, kind: string): WatchedKind {
  return { apiVersion, kind, plural: `${kind.toLowerCase()}s` };
}

/** The kinds the controllers create (for each, the REST plural is the lowercased kind and an s). */
export const OWNED = {
  deployment: owned('apps/v1', 'Deployment'),
  statefulSet: owned('apps/v1', 'StatefulSet'),
  service: owned('v1', 'Service'),
  configMap: owned('v1', 'ConfigMap'),
  persistentVolumeClaim: owned('v1', 'PersistentVolumeClaim'),
  cronJob: owned('batch/v1', 'CronJob'),
  job: owned('batch/v1', 'Job'),
} satisfies Record<string, WatchedKind>;

/**
 * controller-runtime's reconcile contract: given a key, read the current state, converge the world
 * toward the spec and record status. Level-based and idempotent: it may run any number of times.
 */
export interface Reconciler {
  /** Controller name, used in metrics and logs. */
  readonly name: string;
  /** The custom resource it reconciles. */
  readonly primary: WatchedKind;
  /** Kinds it creates; a change to one requeues the owners named in its ownerReferences. */
  readonly owns: WatchedKind[];
  /**
   * `signal` (always given by the manager) aborts when leadership is lost, the manager stops or the reconcile's deadline passes:
   * long work checks it between steps (the API and HTTP clients already end their requests with it).
   */
  reconcile(request: ReconcileRequest, signal?: AbortSignal): Promise<ReconcileResult>;
}
