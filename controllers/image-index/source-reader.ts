import type { ImageIndex, ImageIndexSpec } from '../api/index.js';
import type { StackAccess } from '../bucket/bucket-service.js';
import type { Manifest } from '../support/kube-client.js';
import { controllerRef, standardLabels } from '../support/ownership.js';
import { requestSignal } from '../support/reconcile-signal.js';

/**
 * The index worker reads its bucket source (and a model kept in a bucket) with an access key of its
 * own: a scoped key of the stack's root user that may only read those buckets under those prefixes
 * (the object store refuses it every write, bucket change and other bucket: hack/docs, issue 38). The
 * operator keeps one per ImageIndex, by name, through the control plane's internal API, and hands it
 * to the worker in a Secret of the ImageIndex's own; never the root keys.
 */

/** On an ImageIndex whose key may exist in the object store: removed once the key is deleted. */
export const READER_FINALIZER = 'strata.dev/source-reader';

/** A scoped key's resource, as the object store takes it. */
export interface ReaderResource {
  bucket: string;
  prefix: string;
}

export interface ReaderKey {
  accessKey: string;
  secretKey: string;
}

/** The Secret the worker takes its keys from (the same suffix length as the worker's own name). */
export const readerSecretName = (ix: ImageIndex) => `${ix.metadata.name}-index-reader`;
/** The key's name in the object store: one per ImageIndex. */
export const readerKeyName = (ix: ImageIndex) => `imageindex.${ix.metadata.namespace ?? 'default'}.${ix.metadata.name}`;
/** The Secret's keys. */
export const READER_KEYS = { accessKey: 'accessKey', secretKey: 'secretKey' } as const;

/** What the worker reads from the object store: the source's bucket and prefix, the model's; none without buckets. */
export function readerResources(spec: ImageIndexSpec): ReaderResource[] {
  const resources: ReaderResource[] = [];
  if (spec.source.bucket) resources.push({ bucket: spec.source.bucket, prefix: spec.source.prefix ?? '' });
  if (spec.model.bucket) resources.push({ bucket: spec.model.bucket, prefix: spec.model.prefix ?? '' });
  return resources;
}

/** The Secret holding the worker's key, owned by the ImageIndex (collected with it). */
export function renderReaderSecret(ix: ImageIndex, key: ReaderKey): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: readerSecretName(ix),
      namespace: ix.metadata.namespace ?? 'default',
      labels: standardLabels('image-search', ix.metadata.name),
      ownerReferences: [controllerRef(ix)],
    },
    type: 'Opaque',
    stringData: { [READER_KEYS.accessKey]: key.accessKey, [READER_KEYS.secretKey]: key.secretKey },
  };
}

/** What the ImageIndex controller needs from a namespace's object store. */
export interface ReaderKeyService {
  /** The key named `name` of `parent`, made or its scope brought to `resources` (idempotent). */
  ensure(name: string, parent: string, resources: ReaderResource[]): Promise<ReaderKey>;
  /** Delete the key named `name`; absent is fine. */
  remove(name: string): Promise<void>;
}

export type ReaderKeyServiceFactory = (access: StackAccess) => ReaderKeyService;

/** The control plane's internal API (scoped-key routes), with the stack's internal token. */
export class HttpReaderKeyService implements ReaderKeyService {
  constructor(private readonly access: StackAccess) {}

  async ensure(name: string, parent: string, resources: ReaderResource[]): Promise<ReaderKey> {
    const res = await this.call('PUT', name, { parent, access: 'read', resources });
    if (!res.ok) throw new Error(`control plane answered ${res.status} to PUT scoped key ${name}: ${await res.text()}`);
    const body = (await res.json()) as Partial<ReaderKey>;
    if (typeof body.accessKey !== 'string' || typeof body.secretKey !== 'string') throw new Error(`control plane answered no key for ${name}`);
    return { accessKey: body.accessKey, secretKey: body.secretKey };
  }

  async remove(name: string): Promise<void> {
    const res = await this.call('DELETE', name);
    if (!res.ok && res.status !== 404) throw new Error(`control plane answered ${res.status} to DELETE scoped key ${name}: ${await res.text()}`);
  }

  private call(method: string, name: string, body?: unknown): Promise<Response> {
    return fetch(`${this.access.controlPlaneUrl}/internal/scoped-keys/by-name/${encodeURIComponent(name)}`, {
      method,
      headers: { 'x-strata-internal-token': this.access.internalToken, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: requestSignal(30_000),
    });
  }
}
