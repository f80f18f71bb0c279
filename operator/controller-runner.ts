import { KubernetesObjectApi, makeInformer, type Informer, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../images/service-kit/src/index.js';
import { MANAGED_BY } from '../controllers/support/ownership.js';
import type { Reconciler, WatchedKind } from '../controllers/support/reconciler.js';
import type { OperatorMetrics } from './metrics.js';
import { WorkQueue } from './work-queue.js';

export interface RunnerOptions {
  logger: Logger;
  metrics: OperatorMetrics;
  /** Concurrent reconciles of this controller (different keys only). */
  workers: number;
  /** Every so often every primary object is re-listed and queued: informers can go silent. */
  resyncPeriodMs: number;
  /** First retry delay of a failing key; doubles per failure. */
  baseBackoffMs: number;
  maxBackoffMs: number;
  /** Watch one namespace only; all namespaces when unset. */
  namespace?: string;
}

function restPath(kind: WatchedKind, namespace?: string): string {
  const base = kind.apiVersion.includes('/') ? `/apis/${kind.apiVersion}` : `/api/${kind.apiVersion}`;
  return `${base}${namespace ? `/namespaces/${namespace}` : ''}/${kind.plural}`;
}

/**
 * Runs one reconciler: informers on its custom resource and on the kinds it owns feed a rate-limited
 * work queue; workers call reconcile() per key and requeue with backoff on failure.
 */
export class ControllerRunner {
  readonly queue: WorkQueue;
  private readonly objects: KubernetesObjectApi;
  private informers: Array<Informer<KubernetesObject>> = [];
  private workers: Array<Promise<void>> = [];
  private resyncTimer?: NodeJS.Timeout;
  private stopped = false;
  private synced = false;

  constructor(
    private readonly kc: KubeConfig,
    private readonly reconciler: Reconciler,
    private readonly opts: RunnerOptions,
  ) {
    this.queue = new WorkQueue(opts.baseBackoffMs, opts.maxBackoffMs);
    this.objects = KubernetesObjectApi.makeApiClient(kc);
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  async start(): Promise<void> {
    this.stopped = false;
    const { primary, owns } = this.reconciler;
    const primaryInformer = this.watch(primary, undefined, (obj) => [keyOf(obj)]);
    const ownedInformers = owns.map((kind) =>
      this.watch(kind, `app.kubernetes.io/managed-by=${MANAGED_BY}`, (obj) =>
        (obj.metadata?.ownerReferences ?? [])
          .filter((ref) => ref.apiVersion === primary.apiVersion && ref.kind === primary.kind)
          .map((ref) => `${obj.metadata?.namespace ?? ''}/${ref.name}`),
      ),
    );
    this.informers = [primaryInformer, ...ownedInformers];
    await Promise.all(this.informers.map((i) => i.start()));
    this.synced = true;
    for (let i = 0; i < this.opts.workers; i++) this.workers.push(this.work());
    this.resyncTimer = setInterval(() => void this.resync(), this.opts.resyncPeriodMs);
    this.resyncTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await Promise.all(this.informers.map((i) => i.stop()));
    this.queue.shutdown();
    await Promise.all(this.workers);
    this.workers = [];
    this.synced = false;
  }

  private watch(kind: WatchedKind, labelSelector: string | undefined, keysOf: (obj: KubernetesObject) => string[]): Informer<KubernetesObject> {
    const { namespace } = this.opts;
    const list = () => this.objects.list(kind.apiVersion, kind.kind, namespace, undefined, undefined, undefined, undefined, labelSelector);
    const informer = makeInformer(this.kc, restPath(kind, namespace), list, labelSelector);
    const enqueue = (obj: KubernetesObject) => {
      for (const key of keysOf(obj)) this.enqueue(key);
    };
    informer.on('add', enqueue);
    informer.on('update', enqueue);
    informer.on('delete', enqueue);
    // client-node's informer does not restart after an error: restart it after a pause.
    informer.on('error', (err: unknown) => {
      if (this.stopped) return;
      this.opts.logger.warn({ err, kind: kind.kind }, 'watch failed, restarting');
      setTimeout(() => {
        if (!this.stopped) informer.start().catch(() => undefined);
      }, 1000).unref();
    });
    return informer;
  }

  private enqueue(key: string): void {
    this.queue.add(key);
    this.opts.metrics.queueDepth.set({ controller: this.reconciler.name }, this.queue.depth);
  }

  /** List every primary object afresh and queue it: level-based safety net for missed events. */
  private async resync(): Promise<void> {
    try {
      const { primary } = this.reconciler;
      const list = await this.objects.list(primary.apiVersion, primary.kind, this.opts.namespace);
      for (const obj of list.items) this.enqueue(keyOf(obj));
    } catch (err) {
      this.opts.logger.warn({ err }, 'resync list failed');
    }
  }

  private async work(): Promise<void> {
    const controller = this.reconciler.name;
    const { metrics, logger } = this.opts;
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      metrics.queueDepth.set({ controller }, this.queue.depth);
      const [namespace = '', name = ''] = key.split('/');
      const end = metrics.reconcileDuration.startTimer({ controller });
      try {
        const result = await this.reconciler.reconcile({ namespace, name });
        this.queue.forget(key);
        if (result.requeueAfterMs !== undefined) {
          this.queue.addAfter(key, result.requeueAfterMs);
          metrics.reconcileTotal.inc({ controller, result: 'requeue' });
        } else {
          metrics.reconcileTotal.inc({ controller, result: 'success' });
        }
      } catch (err) {
        const delay = this.queue.addRateLimited(key);
        metrics.reconcileTotal.inc({ controller, result: 'error' });
        metrics.queueRetries.inc({ controller });
        logger.warn({ err: err instanceof Error ? err.message : err, controller, key, retryInMs: delay }, 'reconcile failed');
      } finally {
        end();
        this.queue.done(key);
      }
    }
  }
}

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}
