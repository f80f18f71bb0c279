import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../images/service-kit/src/index.js';
import { MANAGED_SELECTOR } from '../controllers/support/ownership.js';
import type { Reconciler } from '../controllers/support/reconciler.js';
import { runWithReconcileSignal } from '../controllers/support/reconcile-signal.js';
import type { SharedInformerFactory } from './shared-informer.js';
import type { OperatorMetrics } from './metrics.js';
import { WorkQueue } from './work-queue.js';

export interface RunnerOptions {
  logger: Logger;
  metrics: OperatorMetrics;
  /** Concurrent reconciles of this controller (different keys only). */
  workers: number;
  /** Every so often the informers relist and every primary object is queued: informers can go silent. */
  resyncPeriodMs: number;
  /** First retry delay of a failing key; doubles per failure. */
  baseBackoffMs: number;
  maxBackoffMs: number;
  /** Watch one namespace only; all namespaces when unset. */
  namespace?: string;
  /** A reconcile still running after this long is aborted (and retried with backoff), as controller-runtime's per-reconcile context deadline. */
  reconcileTimeoutMs: number;
}

/**
 * Runs one reconciler: the shared informers of its custom resource and of the kinds it owns feed a
 * rate-limited work queue; workers call reconcile() per key and requeue with backoff on failure.
 */
export class ControllerRunner {
  readonly queue: WorkQueue;
  private workers: Array<Promise<void>> = [];
  private synced = false;
  /** Aborted on stop: every reconcile in flight ends with it. */
  private running = new AbortController();

  constructor(
    private readonly informers: SharedInformerFactory,
    private readonly reconciler: Reconciler,
    private readonly opts: RunnerOptions,
  ) {
    this.queue = new WorkQueue(opts.baseBackoffMs, opts.maxBackoffMs);
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  /** Subscribe to the informers this controller needs (before the factory starts them). */
  register(): void {
    const { primary, owns } = this.reconciler;
    const { namespace } = this.opts;
    this.informers.informerFor({ ...primary, namespace }).onChange((obj) => this.enqueue(keyOf(obj)));
    for (const kind of owns) {
      this.informers.informerFor({ ...kind, namespace, labelSelector: MANAGED_SELECTOR }).onChange((obj) => {
        for (const ref of obj.metadata?.ownerReferences ?? []) {
          if (ref.apiVersion === primary.apiVersion && ref.kind === primary.kind) this.enqueue(`${obj.metadata?.namespace ?? ''}/${ref.name}`);
        }
      });
    }
  }

  /** Start the workers once the informers have synced. */
  start(): void {
    this.synced = true;
    for (let i = 0; i < this.opts.workers; i++) this.workers.push(this.work());
  }

  /** Stop taking keys, abort the reconciles in flight (their requests end at once) and wait for them to return. */
  async stop(): Promise<void> {
    this.queue.shutdown();
    this.running.abort(new Error(`controller ${this.reconciler.name} stopped`));
    await Promise.all(this.workers);
    this.workers = [];
    this.synced = false;
  }

  private enqueue(key: string): void {
    this.queue.add(key);
    this.opts.metrics.queueDepth.set({ controller: this.reconciler.name }, this.queue.depth);
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
        const signal = AbortSignal.any([this.running.signal, AbortSignal.timeout(this.opts.reconcileTimeoutMs)]);
        const result = await runWithReconcileSignal(signal, () => this.reconciler.reconcile({ namespace, name }, signal));
        // A reconcile that swallowed its abort still did not finish its work: it is retried.
        signal.throwIfAborted();
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
