import { API_VERSION, IMAGE_INDEX_KIND, imageIndexSpec, type ImageIndex, type ImageIndexSpec, type ImageIndexStatus } from '../api/index.js';
import { refOf, type EventRecorder, type KubeClient, type KubeObject } from '../support/kube-client.js';
import { isBeingDeleted, MANAGED_SELECTOR } from '../support/ownership.js';
import { OWNED, type ReconcileRequest, type ReconcileResult, type Reconciler } from '../support/reconciler.js';
import type { OperatorSettings } from '../support/settings.js';
import { STACK } from '../bucket/stack-names.js';
import { applyOwned } from '../support/apply.js';
import { checkedSpec, writeStatus } from '../support/status-writer.js';
import { rfc3339 } from '../support/time.js';
import { HttpIndexWorkerClient, type IndexWorkerClient, type IndexWorkerStatus } from './index-worker-client.js';
import { stackAccessIfReady } from '../bucket/stack-access.js';
import { stackGivenUpReason } from '../bucket/bucket-reconciler.js';
import { secretValue } from '../bucket/stack-secrets.js';
import {
  HttpReaderKeyService,
  READER_FINALIZER,
  READER_KEYS,
  readerKeyName,
  readerResources,
  readerSecretName,
  newReaderKey,
  renderReaderSecret,
  type ReaderKeyServiceFactory,
} from './source-reader.js';
import {
  INDEX_LABEL,
  OPERATION_LABEL,
  REQUEST_ANNOTATION,
  jobName,
  renderImageIndex,
  renderIndexJob,
  workerName,
  workerUrl,
  type IndexOperation,
} from './render-image-index.js';

/** Annotations that request an operation, like the spec fields (handy with kubectl annotate). */
export const MERGE_ANNOTATION = 'strata.dev/merge-request';
export const REBUILD_ANNOTATION = 'strata.dev/rebuild-request';

/** How often the worker's buffer is polled (auto-merge needs it). */
const POLL_MS = 30_000;
/** How soon a deleted ImageIndex's key removal is tried again while its object store is not ready. */
const CLEANUP_RETRY_MS = 15_000;

/** Where the worker's scoped read-only key stands: none needed, made (its id), or waiting for the object store. */
type ReaderState = { kind: 'none' } | { kind: 'ready'; accessKey: string } | { kind: 'waiting' } | { kind: 'failed'; message: string };

/** On a finished Job: its outcome was reported (an Event on the ImageIndex). */
const REPORTED_ANNOTATION = 'strata.dev/outcome-reported';

interface Job extends KubeObject {
  status?: { succeeded?: number; failed?: number; completionTime?: string; conditions?: Array<{ type: string; status: string }> };
}
interface Secret extends KubeObject {
  data?: Record<string, string>;
}
interface Deployment extends KubeObject {
  status?: { readyReplicas?: number; conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
}

function jobOutcome(job: Job): 'running' | 'succeeded' | 'failed' {
  const done = (type: string) => job.status?.conditions?.some((c) => c.type === type && c.status === 'True');
  if (done('Complete') || (job.status?.succeeded ?? 0) > 0) return 'succeeded';
  if (done('Failed')) return 'failed';
  return 'running';
}

/**
 * ImageIndex → index worker (Deployment, Service, state volume); merge and rebuild run as Jobs, on
 * request (spec field or annotation with a new value) or, for merges, when the buffer outgrows the
 * threshold and autoMerge is on. One operation at a time.
 */
export class ImageIndexReconciler implements Reconciler {
  readonly name = 'imageindex';
  readonly primary = { apiVersion: API_VERSION, kind: IMAGE_INDEX_KIND.kind, plural: IMAGE_INDEX_KIND.plural };
  readonly owns = [OWNED.deployment, OWNED.service, OWNED.persistentVolumeClaim, OWNED.job];

  constructor(
    private readonly kube: KubeClient,
    private readonly events: EventRecorder,
    private readonly settings: OperatorSettings,
    private readonly worker: IndexWorkerClient = new HttpIndexWorkerClient(),
    private readonly readerKeys: ReaderKeyServiceFactory = (access) => new HttpReaderKeyService(access),
  ) {}

  async reconcile({ namespace, name }: ReconcileRequest): Promise<ReconcileResult> {
    const ix = await this.kube.get<ImageIndex>({ ...this.primary, namespace, name });
    if (!ix) return {};
    if (isBeingDeleted(ix)) return this.releaseReader(ix);
    const spec = await checkedSpec(this.kube, this.events, ix, imageIndexSpec, IMAGE_INDEX_KIND);
    if (!spec) return {};
    const reader = await this.ensureReader(ix, spec);
    await applyOwned(this.kube, this.events, ix, renderImageIndex(ix, spec, this.settings), { endpoint: workerUrl(ix, this.settings) });

    // Status is rebuilt from the world every time: the Jobs (labelled with their operation, annotated
    // with their request) and the worker. Only the worker's last figures are carried over while it
    // cannot be asked, for display.
    const previous: ImageIndexStatus = ix.status ?? {};
    const listed = await this.kube.list<Job>('batch/v1', 'Job', namespace, `${INDEX_LABEL}=${name},${MANAGED_SELECTOR}`);
    let active = listed.find((j) => jobOutcome(j) === 'running');
    await this.reportFinished(ix, listed);
    const jobs = await this.deleteSuperseded(ix, spec, listed);
    const fields: Omit<ImageIndexStatus, 'conditions' | 'observedGeneration'> = {
      endpoint: workerUrl(ix, this.settings),
      ...(reader.kind === 'ready' ? { sourceCredentials: readerSecretName(ix), sourceAccessKey: reader.accessKey } : {}),
      ...(previous.vectors !== undefined ? { vectors: previous.vectors } : {}),
      ...(previous.bufferSize !== undefined ? { bufferSize: previous.bufferSize } : {}),
      ...jobFields(jobs),
    };

    const deployment = await this.kube.get<Deployment>({ apiVersion: 'apps/v1', kind: 'Deployment', namespace, name: workerName(ix) });
    const workerReady = (deployment?.status?.readyReplicas ?? 0) > 0;
    // Bucket sources read through the namespace's object store (it exists once a Bucket does), with a
    // key the store makes once it is ready.
    const storeMissing = reader.kind === 'waiting';
    let observed: IndexWorkerStatus | undefined;
    if (workerReady) {
      try {
        observed = await this.worker.status(workerUrl(ix, this.settings));
        fields.vectors = observed.vectors;
        fields.bufferSize = observed.bufferSize;
      } catch {
        observed = undefined; // unreachable for now: try again at the next poll
      }
    }

    // One operation at a time, also when the worker runs one started outside the operator (its API):
    // a Job now would be refused. Requests wait for the next poll.
    if (!active && workerReady && !observed?.busy) {
      const next = this.nextOperation(ix, spec, jobs, observed);
      if (next) {
        const { object: job, created } = await this.kube.createIfAbsent(renderIndexJob(ix, next.op, next.jobName, this.settings, next.request));
        // A finished Job of the same name already did this very operation: nothing runs now.
        if (created || jobOutcome(job as Job) === 'running') active = job as Job;
        if (created) await this.events.event(ix, 'Normal', next.op === 'merge' ? 'MergeStarted' : 'RebuildStarted', `Job ${next.jobName}: ${next.why}`);
        Object.assign(fields, jobFields([...jobs.filter((j) => j.metadata.name !== job.metadata.name), job as Job]));
      }
    }
    if (active) fields.activeJob = active.metadata.name;

    // The Deployment controller gave up (crashing worker, missing model, no GPU node): Degraded.
    const stalled = deployment?.status?.conditions?.find((c) => c.type === 'Progressing' && c.status === 'False' && c.reason === 'ProgressDeadlineExceeded');
    await writeStatus(this.kube, this.events, ix, {
      fields,
      state: workerReady ? 'ready' : stalled ? 'degraded' : 'progressing',
      reason: workerReady
        ? active
          ? 'IndexOperationRunning'
          : 'WorkerReady'
        : storeMissing
          ? 'WaitingForObjectStore'
          : reader.kind === 'failed'
            ? 'WaitingForReaderKey'
            : stalled
              ? 'WorkerStalled'
              : 'WorkerStarting',
      message: workerReady
        ? active
          ? `serving; Job ${active.metadata.name} running`
          : 'serving searches'
        : storeMissing
          ? (await this.kube.get({ apiVersion: 'v1', kind: 'Secret', namespace, name: STACK.rootSecret }))
            ? `the images or the model come from a bucket: waiting for namespace ${namespace}'s object store to become ready and make the worker's read-only key`
            : `the images or the model come from a bucket, but namespace ${namespace} has no Strata object store yet: create a Bucket`
          : reader.kind === 'failed'
            ? `the worker's read-only key could not be made (asked again at the next poll): ${reader.message}`
            : stalled
              ? `the index worker does not come up: ${stalled.message ?? stalled.reason}`
              : 'waiting for the index worker to become ready',
    });
    return { requeueAfterMs: POLL_MS };
  }

  /**
   * The worker's scoped read-only key: its Secret (made once with a new key pair, then only read) and
   * the object store's key brought to it once the store is ready. The finalizer goes on first (it is the
   * record that a key may exist), with the resourceVersion read, so that a concurrent change conflicts
   * instead of being overwritten. A spec that no longer reads a bucket gives the key back (its Secret
   * stays with the ImageIndex, holding a key the store no longer takes). A store that refuses is shown
   * in status and asked again at the next poll; the worker is applied meanwhile and waits for its Secret.
   */
  private async ensureReader(ix: ImageIndex, spec: ImageIndexSpec): Promise<ReaderState> {
    const resources = readerResources(spec);
    const namespace = ix.metadata.namespace ?? 'default';
    if (resources.length === 0) {
      await this.releaseReader(ix);
      return { kind: 'none' };
    }
    const access = await stackAccessIfReady(this.kube, this.settings, namespace);
    if (!access) return { kind: 'waiting' };
    try {
      if (!ix.metadata.finalizers?.includes(READER_FINALIZER)) {
        await this.kube.mergePatch(refOf(ix), {
          metadata: { resourceVersion: ix.metadata.resourceVersion, finalizers: [...(ix.metadata.finalizers ?? []), READER_FINALIZER] },
        });
      }
      const ref = { apiVersion: 'v1', kind: 'Secret', namespace, name: readerSecretName(ix) };
      let secret = await this.kube.get<Secret>(ref);
      if (!secret) ({ object: secret } = await this.kube.createIfAbsent<Secret>(renderReaderSecret(ix, newReaderKey()) as Secret));
      const accessKey = secretValue(secret, READER_KEYS.accessKey);
      const secretKey = secretValue(secret, READER_KEYS.secretKey);
      if (!accessKey || !secretKey)
        throw new Error(`Secret ${ref.name} lacks ${READER_KEYS.accessKey} or ${READER_KEYS.secretKey}: delete it to have a new key made`);
      const made = !(ix.status?.sourceAccessKey === accessKey);
      await this.readerKeys(access).ensure(readerKeyName(ix), access.rootUser, resources, { accessKey, secretKey });
      if (made) {
        const what = resources.map((r) => `${r.bucket}/${r.prefix}`).join(', ');
        await this.events.event(ix, 'Normal', 'ReaderKeyReady', `the index worker reads ${what} with read-only key ${accessKey}`);
      }
      return { kind: 'ready', accessKey };
    } catch (err) {
      return { kind: 'failed', message: (err as Error).message };
    }
  }

  /**
   * The key goes with its ImageIndex (or with a spec that reads no bucket): deleted in the object store,
   * then the finalizer removed. A store that is gone took its keys with it; one that is there but not
   * ready is waited for, as a Bucket's deletion waits (its namespace terminating, or the stack deletion
   * deadline passing, end the wait with a Warning: the key stays in a store nobody reaches).
   */
  private async releaseReader(ix: ImageIndex): Promise<ReconcileResult> {
    if (!ix.metadata.finalizers?.includes(READER_FINALIZER)) return {};
    const namespace = ix.metadata.namespace ?? 'default';
    const access = await stackAccessIfReady(this.kube, this.settings, namespace);
    if (access) await this.readerKeys(access).remove(readerKeyName(ix));
    else if (await this.kube.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace, name: STACK.controlPlane.name })) {
      const deadlineMs = this.settings.stackDeletionDeadlineSeconds * 1000;
      const givenUp = isBeingDeleted(ix) ? await stackGivenUpReason(this.kube, ix, namespace, deadlineMs) : undefined;
      if (!givenUp) return { requeueAfterMs: CLEANUP_RETRY_MS };
      await this.events.event(ix, 'Warning', 'ReaderKeyLeft', `the index worker's read-only key ${readerKeyName(ix)} was not deleted: ${givenUp}`);
    }
    const finalizers = (ix.metadata.finalizers ?? []).filter((f) => f !== READER_FINALIZER);
    await this.kube.mergePatch(refOf(ix), { metadata: { finalizers, resourceVersion: ix.metadata.resourceVersion } });
    return {};
  }

  /**
   * An Event for each Job that finished, once: the Job itself is marked as reported (an annotation),
   * so that neither a lost status write nor a restart reports it twice.
   */
  private async reportFinished(ix: ImageIndex, jobs: Job[]): Promise<void> {
    for (const job of jobs) {
      const outcome = jobOutcome(job);
      if (outcome === 'running' || job.metadata.annotations?.[REPORTED_ANNOTATION]) continue;
      await this.kube.mergePatch(refOf(job), { metadata: { annotations: { [REPORTED_ANNOTATION]: outcome } } });
      if (outcome === 'succeeded') await this.events.event(ix, 'Normal', 'IndexOperationSucceeded', `Job ${job.metadata.name} finished`);
      else await this.events.event(ix, 'Warning', 'IndexOperationFailed', `Job ${job.metadata.name} failed`);
    }
  }

  /**
   * Finished Jobs of requests no longer asked for (the request now has another value, or none) are
   * deleted once reported, so that requests do not pile up Jobs; the Job of each current request stays,
   * as the record that it was handled. Automatic merges go by their ttlSecondsAfterFinished. Answers
   * the Jobs that remain.
   */
  private async deleteSuperseded(ix: ImageIndex, spec: ImageIndexSpec, jobs: Job[]): Promise<Job[]> {
    const annotations = ix.metadata.annotations ?? {};
    const current = new Set<string>();
    const rebuild = spec.rebuildRequest ?? annotations[REBUILD_ANNOTATION];
    const merge = spec.mergeRequest ?? annotations[MERGE_ANNOTATION];
    if (rebuild) current.add(jobName(ix, 'rebuild', `request:${rebuild}`));
    if (merge) current.add(jobName(ix, 'merge', `request:${merge}`));
    const superseded = jobs.filter(
      (j) => j.metadata.annotations?.[REQUEST_ANNOTATION] !== undefined && jobOutcome(j) !== 'running' && !current.has(j.metadata.name),
    );
    for (const job of superseded) await this.kube.delete(refOf(job));
    return jobs.filter((j) => !superseded.includes(j));
  }

  /**
   * Rebuild requests first (a rebuild includes a merge), then merge requests, then the auto-merge. A
   * request is handled once a Job for its value exists (Jobs are named by the request).
   */
  private nextOperation(
    ix: ImageIndex,
    spec: ImageIndexSpec,
    jobs: Job[],
    observed: IndexWorkerStatus | undefined,
  ): { op: IndexOperation; jobName: string; request?: string; why: string } | undefined {
    const annotations = ix.metadata.annotations ?? {};
    const exists = (name: string) => jobs.some((j) => j.metadata.name === name);
    const rebuild = spec.rebuildRequest ?? annotations[REBUILD_ANNOTATION];
    if (rebuild && !exists(jobName(ix, 'rebuild', `request:${rebuild}`))) {
      return { op: 'rebuild', jobName: jobName(ix, 'rebuild', `request:${rebuild}`), request: rebuild, why: `rebuild requested (${rebuild})` };
    }
    const merge = spec.mergeRequest ?? annotations[MERGE_ANNOTATION];
    if (merge && !exists(jobName(ix, 'merge', `request:${merge}`))) {
      return { op: 'merge', jobName: jobName(ix, 'merge', `request:${merge}`), request: merge, why: `merge requested (${merge})` };
    }
    if (spec.autoMerge && observed && observed.bufferSize > spec.bufferThreshold) {
      // Named by the worker state it merges, never by a counter in status (a lost status write would
      // reuse a finished Job's name and block every later merge).
      const state = `${observed.vectors}:${observed.bufferSize}`;
      return { op: 'merge', jobName: jobName(ix, 'merge', `auto:${state}`), why: `buffer ${observed.bufferSize} > threshold ${spec.bufferThreshold}` };
    }
    return undefined;
  }
}

/** The newest first: by creation time, then name. */
function newestFirst(a: Job, b: Job): number {
  const ta = new Date(a.metadata.creationTimestamp ?? 0).getTime();
  const tb = new Date(b.metadata.creationTimestamp ?? 0).getTime();
  return tb - ta || b.metadata.name.localeCompare(a.metadata.name);
}

/** The status fields the index's Jobs tell: the requests handled, the last merge, how many exist. */
function jobFields(jobs: Job[]): Pick<ImageIndexStatus, 'handledMergeRequest' | 'handledRebuildRequest' | 'lastMergeTime' | 'jobCount'> {
  const sorted = [...jobs].sort(newestFirst);
  const requestOf = (op: IndexOperation) =>
    sorted.find((j) => j.metadata.labels?.[OPERATION_LABEL] === op && j.metadata.annotations?.[REQUEST_ANNOTATION] !== undefined)?.metadata.annotations?.[
      REQUEST_ANNOTATION
    ];
  const merged = jobs
    .filter((j) => jobOutcome(j) === 'succeeded' && j.status?.completionTime)
    .map((j) => j.status!.completionTime!)
    .sort()
    .pop();
  const handledMergeRequest = requestOf('merge');
  const handledRebuildRequest = requestOf('rebuild');
  return {
    ...(handledMergeRequest !== undefined ? { handledMergeRequest } : {}),
    ...(handledRebuildRequest !== undefined ? { handledRebuildRequest } : {}),
    ...(merged ? { lastMergeTime: rfc3339(merged) } : {}),
    jobCount: jobs.length,
  };
}
