import { randomBytes } from 'node:crypto';
import type { ImageIndex, ImageIndexSpec } from '../api/index.js';
import { controlPlaneCall, type StackAccess } from '../bucket/bucket-service.js';
import type { Manifest } from '../support/kube-client.js';
import { controllerRef, standardLabels } from '../support/ownership.js';

/**
 * The index worker reads its bucket source (and a model kept in a bucket) with an access key of its
 * own: a scoped key of the stack's root user that may only read those buckets under those prefixes
 * (the object store refuses it every write, bucket change and other bucket: hack/docs/object-storage.md).
 * The operator makes the key pair, writes it once to a Secret of the ImageIndex's own (created, never
 * patched: the chart grants no patch on such Secrets) and brings the store's key of that name to it at
 * every reconcile, through the control plane's internal API. Never the root keys.
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

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** A new key pair: a 20-character id as the object store's own, a 40-character secret. */
export function newReaderKey(): ReaderKey {
  return {
    accessKey: Array.from(randomBytes(20), (b) => KEY_ALPHABET[b % 32]).join(''),
    secretKey: randomBytes(30).toString('base64url'),
  };
}

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
  /** Make the store's key named `name` this key pair of `parent`, scoped to `resources` (idempotent). */
  ensure(name: string, parent: string, resources: ReaderResource[], key: ReaderKey): Promise<void>;
  /** Delete the key named `name`; absent is fine. */
  remove(name: string): Promise<void>;
}

export type ReaderKeyServiceFactory = (access: StackAccess) => ReaderKeyService;

/** The control plane's internal API (scoped-key routes), with the stack's internal token. */
export class HttpReaderKeyService implements ReaderKeyService {
  constructor(private readonly access: StackAccess) {}

  async ensure(name: string, parent: string, resources: ReaderResource[], key: ReaderKey): Promise<void> {
    const res = await this.call('PUT', name, { parent, access: 'read', resources, ...key });
    if (!res.ok) throw new Error(`control plane answered ${res.status} to PUT scoped key ${name}: ${await res.text()}`);
    await res.arrayBuffer();
  }

  async remove(name: string): Promise<void> {
    const res = await this.call('DELETE', name);
    if (!res.ok && res.status !== 404) throw new Error(`control plane answered ${res.status} to DELETE scoped key ${name}: ${await res.text()}`);
  }

  private call(method: string, name: string, body?: unknown): Promise<Response> {
    return controlPlaneCall(this.access, method, `/internal/scoped-keys/by-name/${encodeURIComponent(name)}`, body);
  }
}
