import type { ObjectMeta } from '../api/index.js';

/** Any Kubernetes object as the reconcilers handle it: plain JSON with typed metadata. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
}

/** A rendered object: any fields beside apiVersion, kind and metadata. */
export type Manifest = KubeObject & Record<string, unknown>;

/** Identifies an object: apiVersion, kind, namespace, name. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

/**
 * What the reconcilers need from the API server. The operator implements it on
 * `@kubernetes/client-node`; the reconcilers never see the client library.
 */
export interface KubeClient {
  /** Server-side apply as the operator's field manager (forced): create or converge to `obj`. */
  apply<T extends KubeObject>(obj: T): Promise<T>;
  /** Create only when absent; an existing object is returned untouched (data generated once). */
  createIfAbsent<T extends KubeObject>(obj: T): Promise<{ object: T; created: boolean }>;
  get<T extends KubeObject>(ref: ObjectRef): Promise<T | undefined>;
  list<T extends KubeObject>(apiVersion: string, kind: string, namespace: string, labelSelector?: string): Promise<T[]>;
  /** Delete (background propagation); absent is fine. */
  delete(ref: ObjectRef): Promise<void>;
  /** JSON merge patch of the main resource (metadata such as finalizers). */
  mergePatch<T extends KubeObject>(ref: ObjectRef, patch: object): Promise<T>;
  /** JSON merge patch of the /status subresource. */
  patchStatus(ref: ObjectRef, status: object): Promise<void>;
  /** Whether the API server serves this group/version (discovery, open to every user): a CRD's API exists. */
  servesApi(apiVersion: string): Promise<boolean>;
}

/** Records Kubernetes Events about an object (kubectl describe shows them). */
export interface EventRecorder {
  event(about: KubeObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
}

export function refOf(obj: KubeObject): ObjectRef {
  return { apiVersion: obj.apiVersion, kind: obj.kind, namespace: obj.metadata.namespace ?? '', name: obj.metadata.name };
}
