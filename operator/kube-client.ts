import {
  ApiException,
  ApisApi,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { timedConfiguration } from './api-configuration.js';
import { CUSTOM_RESOURCE_KINDS, GROUP, VERSION } from '../controllers/api/index.js';
import type { KubeClient, KubeObject, ObjectRef } from '../controllers/support/kube-client.js';

export const FIELD_MANAGER = 'strata-operator';
/** client-go's usual request timeout: no API call of a reconcile waits longer. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiException && err.code === 404;
}
export function isConflict(err: unknown): boolean {
  return err instanceof ApiException && err.code === 409;
}

/**
 * The reconcilers' view of the API server, on `@kubernetes/client-node`. Apply is server-side apply
 * (`application/apply-patch+yaml`, forced, field manager strata-operator); client-node's typed patch
 * calls would default to JSON patch, so every patch names its content type. Every request ends after
 * `requestTimeoutMs`, or with the reconcile it serves (see reconcile-signal.ts).
 */
export class ClientNodeKubeClient implements KubeClient {
  private readonly objects: KubernetesObjectApi;
  private readonly custom: CustomObjectsApi;
  private readonly apis: ApisApi;

  constructor(kc: KubeConfig, requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS) {
    const configuration = timedConfiguration(kc, requestTimeoutMs);
    this.objects = new KubernetesObjectApi(configuration);
    this.custom = new CustomObjectsApi(configuration);
    this.apis = new ApisApi(configuration);
  }

  async servesApi(apiVersion: string): Promise<boolean> {
    if (!apiVersion.includes('/')) return apiVersion === 'v1';
    const { groups } = await this.apis.getAPIVersions();
    return groups.some((g) => g.versions.some((v) => v.groupVersion === apiVersion));
  }

  async apply<T extends KubeObject>(obj: T): Promise<T> {
    const applied = await this.objects.patch(toClient(obj), undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
    return fromClient<T>(applied);
  }

  async createIfAbsent<T extends KubeObject>(obj: T): Promise<{ object: T; created: boolean }> {
    try {
      const created = await this.objects.create(toClient(obj), undefined, undefined, FIELD_MANAGER);
      return { object: fromClient<T>(created), created: true };
    } catch (err) {
      if (!isConflict(err)) throw err;
      const existing = await this.get<T>({ apiVersion: obj.apiVersion, kind: obj.kind, namespace: obj.metadata.namespace ?? '', name: obj.metadata.name });
      if (!existing) throw err;
      return { object: existing, created: false };
    }
  }

  async get<T extends KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    try {
      return fromClient<T>(await this.objects.read({ apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list<T extends KubeObject>(apiVersion: string, kind: string, namespace: string, labelSelector?: string): Promise<T[]> {
    const list = await this.objects.list(apiVersion, kind, namespace, undefined, undefined, undefined, undefined, labelSelector);
    // List items carry no apiVersion/kind on the wire; put them back.
    return list.items.map((item) => fromClient<T>({ ...item, apiVersion, kind }));
  }

  async delete(ref: ObjectRef): Promise<void> {
    try {
      await this.objects.delete(
        { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } },
        undefined,
        undefined,
        undefined,
        undefined,
        'Background',
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  async mergePatch<T extends KubeObject>(ref: ObjectRef, patch: object): Promise<T> {
    const spec = {
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      ...patch,
      metadata: { ...((patch as { metadata?: object }).metadata ?? {}), name: ref.name, namespace: ref.namespace },
    };
    return fromClient<T>(await this.objects.patch(spec, undefined, undefined, FIELD_MANAGER, undefined, PatchStrategy.MergePatch));
  }

  async patchStatus(ref: ObjectRef, status: object): Promise<void> {
    const def = CUSTOM_RESOURCE_KINDS.find((d) => d.kind === ref.kind);
    if (!def || ref.apiVersion !== `${GROUP}/${VERSION}`) throw new Error(`status patches are for Strata kinds only, not ${ref.apiVersion} ${ref.kind}`);
    await this.custom.patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, namespace: ref.namespace, plural: def.plural, name: ref.name, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

function toClient(obj: KubeObject): KubernetesObject {
  return renameIngressPeers(obj, 'from', '_from') as unknown as KubernetesObject;
}

/** client-node returns model classes with Date fields for built-in kinds; reconcilers want plain JSON. */
function fromClient<T>(obj: unknown): T {
  return renameIngressPeers(JSON.parse(JSON.stringify(obj)) as KubeObject, '_from', 'from') as T;
}

/**
 * client-node serializes built-in kinds through its models, which name a NetworkPolicy ingress rule's
 * `from` `_from` (a reserved word) and drop a plain `from`: the policy would reach the API server as
 * `ingress: [{}]`, which admits everyone. The only such renamed field among the kinds the operator
 * writes (the others are in list metadata and CRD schemas); test/controllers/wire.test.ts checks it.
 */
function renameIngressPeers(obj: KubeObject, from: string, to: string): KubeObject {
  const spec = (obj as { spec?: { ingress?: Array<Record<string, unknown>> } }).spec;
  if (obj.kind !== 'NetworkPolicy' || !spec?.ingress) return obj;
  const ingress = spec.ingress.map(({ [from]: peers, ...rule }) => (peers === undefined ? rule : { ...rule, [to]: peers }));
  return { ...obj, spec: { ...spec, ingress } } as KubeObject;
}
