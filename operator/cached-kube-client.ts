import type { KubernetesObject } from '@kubernetes/client-node';
import { refOf, type KubeClient, type KubeObject, type ObjectRef } from '../controllers/support/kube-client.js';
import { isUpToDate, withDesiredHash } from './desired-state.js';
import type { SharedInformer, SharedInformerFactory } from './shared-informer.js';

/** Label selector terms (`a=b`, `a==b`, `a!=b`, `a`, `!a`) as a set of normalized strings. */
function selectorTerms(selector: string | undefined): string[] {
  return (selector ?? '')
    .split(',')
    .map((t) => t.trim().replace('==', '='))
    .filter(Boolean);
}

function matchesSelector(obj: KubeObject, terms: string[]): boolean {
  const labels = obj.metadata.labels ?? {};
  return terms.every((t) => {
    const ne = t.split('!=');
    if (ne.length === 2) return labels[ne[0]!] !== ne[1];
    const eq = t.split('=');
    if (eq.length === 2) return labels[eq[0]!] === eq[1];
    return t.startsWith('!') ? !(t.slice(1) in labels) : t in labels;
  });
}

/** Reconcilers change what they read (writeStatus sets status): they get copies, never the cache's objects. */
function copy<T>(obj: KubernetesObject | KubeObject): T {
  return structuredClone(obj) as unknown as T;
}

const refKey = (ref: ObjectRef) => `${ref.apiVersion}|${ref.kind}|${ref.namespace}|${ref.name}`;

/**
 * The reconcilers' client as controller-runtime gives it: reads of watched kinds come from the shared
 * informers' caches, and an apply whose configuration is what the live object was last applied from
 * (same hash annotation, no field drifted since) sends nothing.
 *
 * Kinds no informer watches (Secrets: the operator may not list or watch them; the database and broker
 * operators' resources, whose APIs may not exist; NetworkPolicies and disruption budgets, which only
 * the operator writes) are kept in a memo of what this client last read or
 * wrote, dropped at every resync: generated Secrets never change, and any other change is seen
 * within one resync period.
 */
export class CachedKubeClient implements KubeClient {
  private memo = new Map<string, KubeObject>();
  private servedApis = new Map<string, boolean>();

  constructor(
    private readonly inner: KubeClient,
    private readonly informers: SharedInformerFactory,
    private readonly memoKinds: string[] = ['Secret', 'Cluster', 'RabbitmqCluster', 'NetworkPolicy', 'PodDisruptionBudget'],
  ) {
    informers.onResync(() => {
      this.memo = new Map();
      this.servedApis = new Map();
    });
  }

  /** Asked once per resync period: a CRD installed later is seen within one. */
  async servesApi(apiVersion: string): Promise<boolean> {
    const known = this.servedApis.get(apiVersion);
    if (known !== undefined) return known;
    const served = await this.inner.servesApi(apiVersion);
    this.servedApis.set(apiVersion, served);
    return served;
  }

  async apply<T extends KubeObject>(obj: T): Promise<T> {
    const desired = withDesiredHash(obj);
    const live = this.cached<T>(refOf(desired));
    if (live && isUpToDate(desired, live)) return live;
    return this.remember(await this.inner.apply(desired));
  }

  async createIfAbsent<T extends KubeObject>(obj: T): Promise<{ object: T; created: boolean }> {
    const live = this.cached<T>(refOf(obj));
    if (live) return { object: live, created: false };
    const result = await this.inner.createIfAbsent(obj);
    return { ...result, object: this.remember(result.object) };
  }

  async get<T extends KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    const live = this.cached<T>(ref);
    if (live) return live;
    // An informer without a selector holds every object of its scope: a miss there is an absence.
    if (this.informerFor(ref.apiVersion, ref.kind, ref.namespace, '')) return undefined;
    const read = await this.inner.get<T>(ref);
    return read && this.remember(read);
  }

  async list<T extends KubeObject>(apiVersion: string, kind: string, namespace: string, labelSelector?: string): Promise<T[]> {
    const informer = this.informerFor(apiVersion, kind, namespace, labelSelector);
    if (!informer) return this.inner.list<T>(apiVersion, kind, namespace, labelSelector);
    const terms = selectorTerms(labelSelector);
    return informer
      .list(namespace)
      .filter((o) => matchesSelector(o as unknown as KubeObject, terms))
      .map((o) => copy<T>(o));
  }

  delete(ref: ObjectRef): Promise<void> {
    this.memo.delete(refKey(ref));
    return this.inner.delete(ref);
  }

  mergePatch<T extends KubeObject>(ref: ObjectRef, patch: object): Promise<T> {
    return this.inner.mergePatch<T>(ref, patch);
  }

  patchStatus(ref: ObjectRef, status: object): Promise<void> {
    return this.inner.patchStatus(ref, status);
  }

  /**
   * A synced informer of this kind whose scope covers the namespace and whose selector terms are all
   * among the requested ones (so that it holds every object the request selects).
   */
  private informerFor(apiVersion: string, kind: string, namespace: string, labelSelector: string | undefined): SharedInformer | undefined {
    const wanted = selectorTerms(labelSelector);
    return this.informers
      .all()
      .find(
        (i) =>
          i.synced &&
          i.scope.apiVersion === apiVersion &&
          i.scope.kind === kind &&
          !i.scope.fieldSelector &&
          (!i.scope.namespace || i.scope.namespace === namespace) &&
          selectorTerms(i.scope.labelSelector).every((t) => wanted.includes(t)),
      );
  }

  private cached<T>(ref: ObjectRef): T | undefined {
    for (const i of this.informers.all()) {
      if (!i.synced || i.scope.apiVersion !== ref.apiVersion || i.scope.kind !== ref.kind || i.scope.fieldSelector) continue;
      const hit = i.get(ref.namespace, ref.name);
      if (hit) return copy<T>(hit);
    }
    const memo = this.memo.get(refKey(ref));
    return memo && copy<T>(memo);
  }

  private remember<T extends KubeObject>(obj: T): T {
    if (this.memoKinds.includes(obj.kind)) this.memo.set(refKey(refOf(obj)), copy(obj));
    return obj;
  }
}
