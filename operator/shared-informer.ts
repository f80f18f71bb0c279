import { KubernetesObjectApi, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../images/service-kit/src/index.js';
import type { WatchedKind } from '../controllers/support/reconciler.js';

/** What an informer watches: a kind, optionally one namespace, a label selector and a field selector. */
export interface InformerScope extends WatchedKind {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

type Handler = (obj: KubernetesObject) => void;

function restPath(kind: WatchedKind, namespace?: string): string {
  const base = kind.apiVersion.includes('/') ? `/apis/${kind.apiVersion}` : `/api/${kind.apiVersion}`;
  return `${base}${namespace ? `/namespaces/${namespace}` : ''}/${kind.plural}`;
}

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

/**
 * client-go's shared informer: one list and one watch for a kind, a cache of what they delivered, and
 * any number of handlers told of every change. A watch that ends is resumed from the last resource
 * version (or relisted when that has expired); resync() relists and tells the handlers of every
 * object, since a watch can go silent without ending.
 */
export class SharedInformer {
  private readonly objects = new Map<string, KubernetesObject>();
  private readonly handlers: Handler[] = [];
  private readonly api: KubernetesObjectApi;
  private readonly watcher: Watch;
  private resourceVersion = '';
  private request?: AbortController;
  private restartTimer?: NodeJS.Timeout;
  private running = false;
  synced = false;

  constructor(
    kc: KubeConfig,
    readonly scope: InformerScope,
    private readonly logger: Logger,
  ) {
    this.api = KubernetesObjectApi.makeApiClient(kc);
    this.watcher = new Watch(kc);
  }

  /** Called with every added, changed or deleted object (deleted: its last known state). */
  onChange(handler: Handler): void {
    this.handlers.push(handler);
  }

  get(namespace: string, name: string): KubernetesObject | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  list(namespace?: string): KubernetesObject[] {
    return [...this.objects.values()].filter((o) => !namespace || o.metadata?.namespace === namespace);
  }

  /** Resolves once the first list is in the cache and the watch is open. */
  async start(): Promise<void> {
    this.running = true;
    await this.relist(false);
    await this.watch();
    this.synced = true;
  }

  stop(): void {
    this.running = false;
    this.synced = false;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.request?.abort();
    this.request = undefined;
  }

  /** Relist into the cache and tell the handlers of every object (level-based safety net). */
  async resync(): Promise<void> {
    if (!this.running) return;
    await this.relist(true);
  }

  private async relist(notifyAll: boolean): Promise<void> {
    const { apiVersion, kind, namespace, labelSelector, fieldSelector } = this.scope;
    const list = await this.api.list(apiVersion, kind, namespace, undefined, undefined, undefined, fieldSelector, labelSelector);
    const seen = new Set<string>();
    for (const item of list.items) {
      const obj = { ...item, apiVersion, kind } as KubernetesObject;
      const key = keyOf(obj);
      seen.add(key);
      const previous = this.objects.get(key);
      this.objects.set(key, obj);
      if (notifyAll || previous?.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.notify(obj);
    }
    for (const [key, obj] of this.objects) {
      if (seen.has(key)) continue;
      this.objects.delete(key);
      this.notify(obj);
    }
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
  }

  private async watch(): Promise<void> {
    const { apiVersion, kind, namespace, labelSelector, fieldSelector } = this.scope;
    const query: Record<string, string> = { resourceVersion: this.resourceVersion, allowWatchBookmarks: 'true' };
    if (labelSelector) query.labelSelector = labelSelector;
    if (fieldSelector) query.fieldSelector = fieldSelector;
    const onEvent = (phase: string, raw: KubernetesObject & { code?: number }) => {
      if (phase === 'ERROR') {
        if (raw.code === 410) this.resourceVersion = '';
        return;
      }
      const obj = { ...raw, apiVersion, kind } as KubernetesObject;
      if (phase === 'ADDED' || phase === 'MODIFIED') this.objects.set(keyOf(obj), obj);
      if (phase === 'DELETED') this.objects.delete(keyOf(obj));
      this.resourceVersion = obj.metadata?.resourceVersion ?? this.resourceVersion;
      if (phase !== 'BOOKMARK') this.notify(obj);
    };
    this.request = await this.watcher.watch(restPath(this.scope, namespace), query, onEvent, (err: unknown) => this.restart(err));
  }

  /** The watch ended: resume it (relisting first when the resource version expired), after a pause on errors. */
  private restart(err: unknown): void {
    if (!this.running) return;
    if (err) this.logger.warn({ err: err instanceof Error ? err.message : err, kind: this.scope.kind }, 'watch failed, restarting');
    this.restartTimer = setTimeout(
      () => {
        if (!this.running) return;
        const resume = async () => {
          if (!this.resourceVersion) await this.relist(false);
          await this.watch();
        };
        resume().catch((e: unknown) => this.restart(e ?? new Error('watch restart failed')));
      },
      err ? 1000 : 0,
    );
    this.restartTimer.unref();
  }

  private notify(obj: KubernetesObject): void {
    for (const h of this.handlers) h(obj);
  }
}

/** One informer per kind and scope, shared by every controller that asks for it. */
export class SharedInformerFactory {
  private readonly informers = new Map<string, SharedInformer>();
  private readonly resyncListeners: Array<() => void> = [];

  constructor(
    private readonly kc: KubeConfig,
    private readonly logger: Logger,
  ) {}

  informerFor(scope: InformerScope): SharedInformer {
    const key = [scope.apiVersion, scope.kind, scope.namespace ?? '', scope.labelSelector ?? '', scope.fieldSelector ?? ''].join('|');
    let informer = this.informers.get(key);
    if (!informer) {
      informer = new SharedInformer(this.kc, scope, this.logger);
      this.informers.set(key, informer);
    }
    return informer;
  }

  all(): SharedInformer[] {
    return [...this.informers.values()];
  }

  /** Start every informer not yet running; resolves when all have synced. */
  async start(): Promise<void> {
    await Promise.all(
      this.all()
        .filter((i) => !i.synced)
        .map((i) => i.start()),
    );
  }

  stop(): void {
    for (const i of this.all()) i.stop();
    this.informers.clear();
  }

  /** Called at the start of every resync (caches kept beside the informers are dropped then). */
  onResync(listener: () => void): void {
    this.resyncListeners.push(listener);
  }

  async resync(): Promise<void> {
    for (const l of this.resyncListeners) l();
    await Promise.all(
      this.all().map((i) =>
        i.resync().catch((err: unknown) => this.logger.warn({ err: err instanceof Error ? err.message : err, kind: i.scope.kind }, 'resync list failed')),
      ),
    );
  }
}
