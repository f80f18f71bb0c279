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
  /** Bumped whenever the cache is replaced or the informer stops: events of older watches are dropped. */
  private generation = 0;
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
    await this.listAndWatch(false);
    this.synced = true;
  }

  stop(): void {
    this.running = false;
    this.synced = false;
    this.generation++;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.request?.abort();
    this.request = undefined;
  }

  /** Relist into the cache and tell the handlers of every object (level-based safety net). */
  async resync(): Promise<void> {
    if (!this.running) return;
    await this.listAndWatch(true);
  }

  /**
   * client-go's ListAndWatch: list, replace the cache with the list in one step, and watch from the
   * list's resource version. A watch still open is dropped at that moment and whatever it delivers
   * afterwards ignored: the list may be older than events that watch already delivered (a deletion
   * during the list), and laying it over them would resurrect objects; the new watch replays every
   * change after the list instead. A failed list leaves the cache and the open watch as they were.
   */
  private async listAndWatch(notifyAll: boolean): Promise<void> {
    const { apiVersion, kind, namespace, labelSelector, fieldSelector } = this.scope;
    const list = await this.api.list(apiVersion, kind, namespace, undefined, undefined, undefined, fieldSelector, labelSelector);
    if (!this.running) return;
    const generation = ++this.generation;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.request?.abort();
    this.request = undefined;
    this.replace(
      list.items.map((item) => ({ ...item, apiVersion, kind }) as KubernetesObject),
      notifyAll,
    );
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
    try {
      await this.watch(generation);
    } catch (err) {
      // The first start reports the failure; later the informer keeps trying, as after a watch ends.
      if (!this.synced) throw err;
      this.restart(err ?? new Error('watch failed'), generation);
    }
  }

  private replace(items: KubernetesObject[], notifyAll: boolean): void {
    const previous = new Map(this.objects);
    this.objects.clear();
    for (const obj of items) this.objects.set(keyOf(obj), obj);
    for (const obj of items) {
      if (notifyAll || previous.get(keyOf(obj))?.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.notify(obj);
    }
    for (const [key, obj] of previous) if (!this.objects.has(key)) this.notify(obj);
  }

  private async watch(generation: number): Promise<void> {
    const { apiVersion, kind, namespace, labelSelector, fieldSelector } = this.scope;
    const query: Record<string, string> = { resourceVersion: this.resourceVersion, allowWatchBookmarks: 'true' };
    if (labelSelector) query.labelSelector = labelSelector;
    if (fieldSelector) query.fieldSelector = fieldSelector;
    const current = () => this.running && generation === this.generation;
    const onEvent = (phase: string, raw: KubernetesObject & { code?: number }) => {
      if (!current()) return;
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
    const request = await this.watcher.watch(restPath(this.scope, namespace), query, onEvent, (err: unknown) => {
      if (current()) this.restart(err, generation);
    });
    // A relist replaced this watch while it was opening: it is not wanted any more.
    if (current()) this.request = request;
    else request.abort();
  }

  /** The watch ended: resume it (relisting first when the resource version expired), after a pause on errors. */
  private restart(err: unknown, generation: number): void {
    if (!this.running || generation !== this.generation) return;
    if (err) this.logger.warn({ err: err instanceof Error ? err.message : err, kind: this.scope.kind }, 'watch failed, restarting');
    this.restartTimer = setTimeout(
      () => {
        if (!this.running || generation !== this.generation) return;
        const resume = async () => {
          if (!this.resourceVersion) await this.listAndWatch(false);
          else await this.watch(generation);
        };
        resume().catch((e: unknown) => this.restart(e ?? new Error('watch restart failed'), this.generation));
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
