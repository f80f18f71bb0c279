import { isDeepStrictEqual } from 'node:util';
// The rules in the object store's own form (type-only: nothing of the kit is loaded at run time).
import type { BucketConfigs, CorsRule, LifecycleRule } from '../../images/object-model/src/index.js';
import type { BucketCorsRule, BucketLifecycleRule } from '../api/index.js';
import { requestSignal } from '../support/reconcile-signal.js';
/** The backend a bucket keeps its bytes on, as the control plane's bucket API takes it. */
export interface BackendConfig {
  kind: 'fs' | 'minio' | 'cloud';
  endpoint?: string;
  region?: string;
  bucket?: string;
  prefix?: string;
  useSSL?: boolean;
  pathStyle?: boolean;
  accessKey?: string;
  secretKey?: string;
}

/** The configurations the operator keeps equal to a Bucket's spec, by their API name. */
export type BucketConfigBodies = Pick<BucketConfigs, 'lifecycle' | 'cors'>;

/** A Bucket's spec.cors rule in the control plane's form (no undefined fields: it is compared with what is stored). */
export function corsRuleBody(rule: BucketCorsRule): CorsRule {
  const body: CorsRule = {
    allowedOrigins: rule.allowedOrigins,
    allowedMethods: rule.allowedMethods,
    allowedHeaders: rule.allowedHeaders,
    exposeHeaders: rule.exposeHeaders,
  };
  if (rule.id !== undefined) body.id = rule.id;
  if (rule.maxAgeSeconds !== undefined) body.maxAgeSeconds = rule.maxAgeSeconds;
  return body;
}

/** A Bucket's spec.lifecycle rule in the control plane's form (no undefined fields: it is compared with what is stored). */
export function lifecycleRuleBody(rule: BucketLifecycleRule): LifecycleRule {
  const body: LifecycleRule = { id: rule.id, enabled: rule.enabled, filter: { form: 'filter', prefix: rule.prefix, tags: [] } };
  if (rule.expirationDays !== undefined) body.expiration = { days: rule.expirationDays };
  else if (rule.expirationDate !== undefined) body.expiration = { date: new Date(`${rule.expirationDate}T00:00:00Z`).toISOString() };
  if (rule.abortIncompleteMultipartUploadDays !== undefined) body.abortIncompleteMultipartUploadDays = rule.abortIncompleteMultipartUploadDays;
  return body;
}

/**
 * What the Bucket reconciler needs from the object store of a namespace. The HTTP implementation
 * speaks the control plane's internal API; tests use it against a small recording HTTP server.
 */
export interface BucketService {
  /** Create the bucket owned by the root user; an existing bucket of the root is fine. */
  ensureBucket(name: string, backend: BackendConfig): Promise<'created' | 'exists'>;
  /** Objects and bytes in the bucket. */
  stats(name: string): Promise<BucketStats>;
  /**
   * One bounded step of emptying the bucket: at most `maxKeys` objects go (to the recycle bin), and
   * the bucket itself once it is empty. An absent bucket is gone. Callers repeat it (a reconcile per
   * chunk, requeued between chunks) so that no worker is held for as long as a big bucket takes.
   */
  deleteBucket(name: string, maxKeys?: number): Promise<BucketDeletion>;
  /** Make one of the bucket's configurations exactly these rules (none for an empty list); 'updated' when it was not. */
  ensureConfig<K extends keyof BucketConfigBodies>(name: string, kind: K, rules: BucketConfigBodies[K]): Promise<'updated' | 'unchanged'>;
}

export interface BucketStats {
  objectCount: number;
  /** Unknown when the control plane keeps no statistics (the objects are then counted). */
  bytes?: number;
}

/** Where emptying a bucket stands after one chunk. */
export type BucketDeletion = { gone: true } | { gone: false; objectsLeft: number };

/** Objects deleted per chunk: one listing page, one batch delete (S3's DeleteObjects takes 1 000 keys). */
export const DELETE_CHUNK_KEYS = 1000;

export interface StackAccess {
  namespace: string;
  /** Base URL of the control plane's internal API. */
  controlPlaneUrl: string;
  rootUser: string;
  internalToken: string;
}

/** One request to a stack's control plane internal API: its token, a JSON body, the reconcile's abort and a 30 s bound. */
export function controlPlaneCall(access: StackAccess, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${access.controlPlaneUrl}${path}`, {
    method,
    headers: { 'x-strata-internal-token': access.internalToken, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal: requestSignal(30_000),
  });
}

/** Builds the client for one namespace's stack (tests point it at their own server). */
export type BucketServiceFactory = (access: StackAccess) => BucketService;

/** A bucket name the object store refused, or one that another tenant owns. */
export class BucketConflictError extends Error {}

/** Backend settings the object store refused (unknown kind, incomplete settings): fixed only by a spec change. */
export class BackendRefusedError extends Error {}

interface ErrorBody {
  error?: { code?: string; message?: string };
}

/** The control plane's answer (404) to a bucket without that configuration. */
const NO_CONFIGURATION: Record<keyof BucketConfigBodies, string> = { lifecycle: 'NoSuchLifecycleConfiguration', cors: 'NoSuchCORSConfiguration' };

/** The control plane's internal HTTP API (ADR 0001), authenticated with the internal token. */
export class HttpBucketService implements BucketService {
  constructor(private readonly access: StackAccess) {}

  async ensureBucket(name: string, backend: BackendConfig): Promise<'created' | 'exists'> {
    const res = await this.call('PUT', `/internal/buckets/${encodeURIComponent(name)}`, { owner: this.access.rootUser, backend });
    if (res.ok) return 'created';
    const body = (await res.json().catch(() => ({}))) as ErrorBody;
    if (body.error?.code === 'BucketAlreadyOwnedByYou') return 'exists';
    if (body.error?.code === 'BucketAlreadyExists' || body.error?.code === 'InvalidBucketName') {
      throw new BucketConflictError(`${body.error.code}: ${body.error.message ?? name}`);
    }
    // The data plane found the backend unusable as configured; ServiceUnavailable (unreachable) is retried.
    if (body.error?.code === 'InvalidArgument') throw new BackendRefusedError(`${body.error.code}: ${body.error.message ?? 'backend refused'}`);
    throw new Error(`control plane answered ${res.status} to PUT bucket ${name}: ${JSON.stringify(body)}`);
  }

  /** The control plane's bucket statistics (one query); a listing count where it has none. */
  async stats(name: string): Promise<BucketStats> {
    const bucket = await this.json<{ stats?: { objectCount?: number; bytes?: number } }>('GET', `/internal/buckets/${encodeURIComponent(name)}`);
    if (typeof bucket.stats?.objectCount === 'number') {
      return { objectCount: bucket.stats.objectCount, ...(typeof bucket.stats.bytes === 'number' ? { bytes: bucket.stats.bytes } : {}) };
    }
    return { objectCount: await this.countObjects(name) };
  }

  private async countObjects(name: string, limit = 100_000): Promise<number> {
    let count = 0;
    let token: string | undefined;
    do {
      const q = new URLSearchParams({ maxKeys: '1000', ...(token ? { continuationToken: token } : {}) });
      const page = await this.json<{ objects: unknown[]; isTruncated: boolean; nextContinuationToken?: string }>(
        'GET',
        `/internal/buckets/${encodeURIComponent(name)}/objects?${q}`,
      );
      count += page.objects.length;
      token = page.isTruncated ? page.nextContinuationToken : undefined;
    } while (token && count < limit);
    return count;
  }

  async deleteBucket(name: string, maxKeys = DELETE_CHUNK_KEYS): Promise<BucketDeletion> {
    const path = `/internal/buckets/${encodeURIComponent(name)}`;
    const res = await this.call('GET', `${path}/objects?maxKeys=${maxKeys}`);
    if (res.status === 404) return { gone: true };
    if (!res.ok) throw new Error(`control plane answered ${res.status} listing ${name}`);
    const page = (await res.json()) as { objects: Array<{ key: string }>; isTruncated?: boolean };
    if (page.objects.length > 0) await this.json('POST', `${path}/delete-objects`, { keys: page.objects.map((o) => o.key) });
    // More than this page: the next chunk goes in the next reconcile (objects written meanwhile too).
    if (page.isTruncated) return { gone: false, objectsLeft: (await this.stats(name)).objectCount };
    const del = await this.call('DELETE', path);
    if (del.ok || del.status === 404) return { gone: true };
    // Objects written since the listing: not empty yet, another chunk.
    if (del.status === 409) return { gone: false, objectsLeft: (await this.stats(name)).objectCount };
    throw new Error(`control plane answered ${del.status} to DELETE bucket ${name}`);
  }

  async ensureConfig<K extends keyof BucketConfigBodies>(name: string, kind: K, rules: BucketConfigBodies[K]): Promise<'updated' | 'unchanged'> {
    const path = `/internal/buckets/${encodeURIComponent(name)}/${kind}`;
    const res = await this.call('GET', path);
    if (!res.ok && res.status !== 404) throw new Error(`control plane answered ${res.status} to GET ${path}: ${await res.text()}`);
    const body = (await res.json()) as { rules?: unknown; error?: { code?: string } };
    if (res.status === 404 && body.error?.code !== NO_CONFIGURATION[kind])
      throw new Error(`control plane answered 404 to GET ${path}: ${JSON.stringify(body)}`);
    // Level-based: written only when what is stored differs (no write on every resync).
    if (isDeepStrictEqual(body.rules ?? [], rules)) return 'unchanged';
    const write = rules.length > 0 ? await this.call('PUT', path, { rules }) : await this.call('DELETE', path);
    if (!write.ok) throw new Error(`control plane answered ${write.status} to ${rules.length > 0 ? 'PUT' : 'DELETE'} ${path}: ${await write.text()}`);
    return 'updated';
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.call(method, path, body);
    if (!res.ok) throw new Error(`control plane answered ${res.status} to ${method} ${path}: ${await res.text()}`);
    return (await res.json()) as T;
  }

  private call(method: string, path: string, body?: unknown): Promise<Response> {
    return controlPlaneCall(this.access, method, path, body);
  }
}
