import { API_VERSION, BUCKET_KIND, bucketSpec, type Bucket, type BucketSpec } from '../api/index.js';
import type { EventRecorder, KubeClient, KubeObject } from '../support/kube-client.js';
import { refOf } from '../support/kube-client.js';
import { isBeingDeleted, MANAGED_SELECTOR, sharedOwnerRefs } from '../support/ownership.js';
import { OWNED, type ReconcileRequest, type ReconcileResult, type Reconciler } from '../support/reconciler.js';
import { serviceHost, type OperatorSettings } from '../support/settings.js';
import { claimForApply, notReadyForMs } from '../support/apply.js';
import { checkedSpec, writeStatus } from '../support/status-writer.js';
import {
  BackendRefusedError,
  BucketConflictError,
  HttpBucketService,
  corsRuleBody,
  lifecycleRuleBody,
  type BackendConfig,
  type BucketService,
  type BucketServiceFactory,
} from './bucket-service.js';
import { PgDatabaseProvisioner, type DatabaseProvisioner } from './database-provisioner.js';
import { bundledPostgres, bundledRabbitmq } from './render-backing-services.js';
import { managementUrlOf, RabbitmqManagementProvisioner, type BrokerProvisioner } from './broker-provisioner.js';
import { BackingProviderMissingError, keptBackingProviders } from './backing-providers.js';
import type { BackingProviders } from './render-operated-backing.js';
import { renderFlowRulesConfigMap, renderStorageStack } from './render-storage-stack.js';
import { stackIdentity } from './stack-identity.js';
import { BACKEND_CREDENTIALS_LABEL, backingCredentials, renderStackSecrets, secretValue } from './stack-secrets.js';
import { STACK } from './stack-names.js';
import { dataPlaneOnVolume, stackAccessIfReady } from './stack-access.js';
import { dataPlaneHeldNote, onDataVolume, stackSettingsFor } from './plane-replicas.js';

export const BUCKET_FINALIZER = 'strata.dev/bucket';
/**
 * The bucket name and backend a Bucket's bucket was made with, recorded with its finalizer (status is
 * not memory). They never change (the CRD refuses edits; this is the same rule for objects created
 * before it, or API servers that skip CEL): a changed spec is refused, never acted on.
 */
export const BOUND_ANNOTATIONS = { bucketName: 'strata.dev/bucket-name', backend: 'strata.dev/backend' } as const;

interface Secret extends KubeObject {
  data?: Record<string, string>;
}

/** Poll the object count this often once the bucket is ready. */
const REFRESH_MS = 60_000;
const STACK_WAIT_MS = 10_000;

/**
 * Bucket → the namespace's storage stack exists, and the bucket exists in it with its backend.
 * A finalizer empties and deletes the bucket (Delete) or leaves it (Retain) when the resource goes.
 */
export class BucketReconciler implements Reconciler {
  readonly name = 'bucket';
  readonly primary = { apiVersion: API_VERSION, kind: BUCKET_KIND.kind, plural: BUCKET_KIND.plural };
  readonly owns = [OWNED.deployment, OWNED.statefulSet, OWNED.service, OWNED.configMap, OWNED.cronJob, OWNED.job, OWNED.persistentVolumeClaim];

  constructor(
    private readonly kube: KubeClient,
    private readonly events: EventRecorder,
    private readonly settings: OperatorSettings,
    private readonly serviceFor: BucketServiceFactory = (access) => new HttpBucketService(access),
    private databases?: DatabaseProvisioner,
    private brokers?: BrokerProvisioner,
  ) {}

  async reconcile({ namespace, name }: ReconcileRequest): Promise<ReconcileResult> {
    const bucket = await this.kube.get<Bucket>({ ...this.primary, namespace, name });
    if (!bucket) return {};
    if (isBeingDeleted(bucket)) return this.finalize(bucket, bucketSpec.safeParse(bucket.spec ?? {}).data);
    const spec = await checkedSpec(this.kube, this.events, bucket, bucketSpec);
    if (!spec) return {};
    const bucketName = resolvedName(bucket);
    const endpoint = `http://${serviceHost(this.settings, STACK.gateway.name, namespace)}:${STACK.gateway.port}/${bucketName}`;
    const status = (state: 'progressing' | 'degraded', reason: string, message: string) =>
      writeStatus(this.kube, this.events, bucket, { fields: { bucketName, endpoint }, state, reason, message });
    const changed = immutableChange(bucket, spec);
    if (changed) {
      await status('degraded', 'ImmutableFieldChanged', changed);
      return { requeueAfterMs: REFRESH_MS };
    }

    let live: Bucket[];
    let backingProviders: BackingProviders | undefined;
    try {
      ({ buckets: live, providers: backingProviders } = await this.ensureStack(namespace));
    } catch (err) {
      if (err instanceof BackingProviderMissingError) {
        await status('degraded', 'BackingProviderMissing', err.message);
        return { requeueAfterMs: REFRESH_MS };
      }
      // What the API server or the database refused shows in status, not only in the log; then backoff.
      await status('degraded', 'StackApplyFailed', (err as Error).message);
      throw err;
    }
    // Two resources naming one bucket would share it, and a Delete policy on one would empty the
    // other's: the oldest claim wins, the others wait.
    const holder = live.find((b) => b.metadata.uid !== bucket.metadata.uid && resolvedName(b) === bucketName && claimsEarlier(b, bucket));
    if (holder) {
      await status('degraded', 'BucketNameTaken', `Bucket ${holder.metadata.name} of this namespace already manages bucket ${bucketName}`);
      return { requeueAfterMs: REFRESH_MS };
    }
    const service = await this.serviceIfReady(namespace);
    if (!service) {
      // Past the progress deadline a stack that does not come up is a failure, not progress.
      const stalled = notReadyForMs(bucket.status?.conditions) > this.settings.progressDeadlineSeconds * 1000;
      await status(
        stalled ? 'degraded' : 'progressing',
        stalled ? 'StackNotReady' : 'WaitingForStorageStack',
        stalled
          ? `the gateway and control plane have not become ready within ${this.settings.progressDeadlineSeconds} s: see the stack's Deployments and ` +
              `StatefulSets in namespace ${namespace}`
          : 'waiting for the gateway and control plane to become ready',
      );
      return { requeueAfterMs: STACK_WAIT_MS };
    }

    // Several data planes (from before this fs Bucket) have no volume: wait until one on the volume replaced them.
    if (onDataVolume({ spec }) && !(await dataPlaneOnVolume(this.kube, namespace))) {
      await status('progressing', 'WaitingForDataVolume', 'waiting for the data plane to run as one replica on the data volume (fs backend)');
      return { requeueAfterMs: STACK_WAIT_MS };
    }

    let backend: BackendConfig;
    try {
      backend = await this.backendConfig(namespace, spec, bucketName);
    } catch (err) {
      await status('degraded', 'MissingCredentials', (err as Error).message);
      return { requeueAfterMs: 30_000 };
    }
    try {
      // The finalizer is the record that the bucket may exist in the object store (never the status):
      // added just before the bucket is made, so a resource deleted before then goes at once, and
      // one deleted after it never goes without its deletion policy applied.
      // With the resourceVersion read: a concurrent change (another finalizer) conflicts and is read
      // again, instead of this list replacing it.
      const annotations = bucket.metadata.annotations ?? {};
      if (!bucket.metadata.finalizers?.includes(BUCKET_FINALIZER) || annotations[BOUND_ANNOTATIONS.bucketName] === undefined) {
        await this.kube.mergePatch(refOf(bucket), {
          metadata: {
            resourceVersion: bucket.metadata.resourceVersion,
            finalizers: [...(bucket.metadata.finalizers ?? []).filter((f) => f !== BUCKET_FINALIZER), BUCKET_FINALIZER],
            annotations: { [BOUND_ANNOTATIONS.bucketName]: bucketName, [BOUND_ANNOTATIONS.backend]: JSON.stringify(spec.backend) },
          },
        });
      }
      const outcome = await service.ensureBucket(bucketName, backend);
      if (outcome === 'created') await this.events.event(bucket, 'Normal', 'BucketCreated', `bucket ${bucketName} created on the ${backend.kind} backend`);
      // Without spec.lifecycle / spec.cors the bucket's rules of that kind are left to S3 clients.
      if (spec.lifecycle && (await service.ensureConfig(bucketName, 'lifecycle', spec.lifecycle.rules.map(lifecycleRuleBody))) === 'updated') {
        await this.events.event(bucket, 'Normal', 'LifecycleUpdated', `bucket ${bucketName} now has ${spec.lifecycle.rules.length} lifecycle rule(s)`);
      }
      if (spec.cors && (await service.ensureConfig(bucketName, 'cors', spec.cors.rules.map(corsRuleBody))) === 'updated') {
        await this.events.event(bucket, 'Normal', 'CorsUpdated', `bucket ${bucketName} now has ${spec.cors.rules.length} CORS rule(s)`);
      }
    } catch (err) {
      const conflict = err instanceof BucketConflictError;
      const refused = err instanceof BackendRefusedError;
      await status('degraded', conflict ? 'BucketUnavailable' : refused ? 'BackendRefused' : 'ObjectStoreError', (err as Error).message);
      // Only a change of the spec (or of the name's owner) helps: look again now and then, no hot retries.
      if (conflict || refused) return { requeueAfterMs: REFRESH_MS };
      throw err;
    }
    const { objectCount, bytes } = await service.stats(bucketName);
    await writeStatus(this.kube, this.events, bucket, {
      fields: { bucketName, endpoint, objectCount, ...(bytes !== undefined ? { bytes } : {}), ...(backingProviders ? { backingProviders } : {}) },
      state: 'ready',
      reason: 'BucketReady',
      message: [`bucket ${bucketName} is served at ${endpoint}`, dataPlaneHeldNote(this.settings, { spec })].filter(Boolean).join('; '),
    });
    return { requeueAfterMs: REFRESH_MS };
  }

  /**
   * Secrets and the rules file once, then everything else applied; owned by every live Bucket of the
   * namespace. Returns those live Buckets.
   */
  private async ensureStack(namespace: string): Promise<{ buckets: Bucket[]; providers?: BackingProviders }> {
    const secrets = renderStackSecrets(namespace);
    let credentials: ReturnType<typeof backingCredentials> | undefined;
    for (const obj of [...secrets, renderFlowRulesConfigMap(namespace)]) {
      const { object } = await this.kube.createIfAbsent(obj);
      if (obj.metadata.name === STACK.backingSecret) credentials = backingCredentials(object as Secret);
    }
    if (!credentials) throw new Error(`Secret ${STACK.backingSecret} was not rendered`);
    const buckets = (await this.kube.list<Bucket>(this.primary.apiVersion, this.primary.kind, namespace)).filter((b) => !isBeingDeleted(b));
    const owners = sharedOwnerRefs(buckets);
    if (owners.length === 0) return { buckets };
    if (!bundledPostgres(this.settings)) {
      this.databases ??= new PgDatabaseProvisioner(this.settings.postgresUrl);
      await this.databases.ensure(stackIdentity(namespace), credentials.postgresPassword);
    }
    if (!bundledRabbitmq(this.settings)) {
      this.brokers ??= new RabbitmqManagementProvisioner(this.settings.amqpManagementUrl || managementUrlOf(this.settings.amqpUrl));
      await this.brokers.ensure(stackIdentity(namespace), credentials.rabbitmqPassword);
    }
    const providers = await keptBackingProviders(this.kube, this.settings, namespace);
    const stack = renderStorageStack(namespace, owners, stackSettingsFor(this.settings, buckets), credentials, providers);
    for (const obj of stack) {
      await this.kube.apply(obj.kind === 'PersistentVolumeClaim' ? claimForApply(obj, await this.kube.get(refOf(obj))) : obj);
    }
    await this.deleteSupersededRedisJobs(namespace, stack);
    return { buckets, providers };
  }

  /**
   * The Redis cluster-create Job is named by a digest of its template (a Job's template is immutable):
   * one of an older template is superseded by the current one and deleted, instead of piling up.
   */
  private async deleteSupersededRedisJobs(namespace: string, stack: KubeObject[]): Promise<void> {
    const prefix = `${STACK.redisClusterJob}-`;
    const current = new Set(stack.filter((o) => o.kind === 'Job' && o.metadata.name.startsWith(prefix)).map((o) => o.metadata.name));
    if (current.size === 0) return;
    for (const job of await this.kube.list<KubeObject>('batch/v1', 'Job', namespace, MANAGED_SELECTOR)) {
      if (job.metadata.name.startsWith(prefix) && !current.has(job.metadata.name)) await this.kube.delete(refOf(job));
    }
  }

  /** A client for the namespace's stack once its control plane and gateway report ready. */
  private async serviceIfReady(namespace: string): Promise<BucketService | undefined> {
    const access = await stackAccessIfReady(this.kube, this.settings, namespace);
    return access && this.serviceFor(access);
  }

  private async backendConfig(namespace: string, spec: BucketSpec, bucketName: string): Promise<BackendConfig> {
    const b = spec.backend;
    if (b.kind === 'fs') return { kind: 'fs', ...(b.pathPrefix ? { prefix: b.pathPrefix } : {}) };
    const read = async (ref: { name: string; key: string } | undefined, what: string) => {
      if (!ref) throw new Error(`backend ${b.kind} needs ${what}`);
      const secret = await this.kube.get<Secret>({ apiVersion: 'v1', kind: 'Secret', namespace, name: ref.name });
      // Opt-in: whoever may write Buckets must not make the operator hand any Secret of the namespace to a backend.
      if (secret && secret.metadata.labels?.[BACKEND_CREDENTIALS_LABEL] !== 'true') {
        throw new Error(`Secret ${ref.name} (${what}) lacks the label ${BACKEND_CREDENTIALS_LABEL}=true that allows the operator to use it`);
      }
      const value = secretValue(secret, ref.key);
      if (value === undefined) throw new Error(`Secret ${ref.name} has no key ${ref.key} (${what})`);
      return value;
    };
    return {
      kind: b.kind,
      endpoint: b.endpoint,
      region: b.region,
      bucket: b.targetBucket ?? bucketName,
      useSSL: b.useSSL,
      ...(b.pathStyle !== undefined ? { pathStyle: b.pathStyle } : {}),
      ...(b.pathPrefix ? { prefix: b.pathPrefix } : {}),
      accessKey: await read(b.accessKeySecretRef, 'accessKeySecretRef'),
      secretKey: await read(b.secretKeySecretRef, 'secretKeySecretRef'),
    };
  }

  private stackGivenUp(bucket: Bucket, namespace: string): Promise<string | undefined> {
    return stackGivenUpReason(this.kube, bucket, namespace, this.settings.stackDeletionDeadlineSeconds * 1000);
  }

  /** The resource is going: apply the deletion policy, then let it go. */
  private async finalize(bucket: Bucket, spec: BucketSpec | undefined): Promise<ReconcileResult> {
    if (!bucket.metadata.finalizers?.includes(BUCKET_FINALIZER)) return {};
    const bucketName = resolvedName(bucket);
    const namespace = bucket.metadata.namespace ?? '';
    const others = (await this.kube.list<Bucket>(this.primary.apiVersion, this.primary.kind, namespace)).filter(
      (b) => b.metadata.uid !== bucket.metadata.uid && !isBeingDeleted(b) && resolvedName(b) === bucketName,
    );
    const service = spec?.deletionPolicy === 'Delete' && others.length === 0 ? await this.serviceIfReady(namespace) : undefined;
    if (spec?.deletionPolicy === 'Delete' && others.length > 0) {
      await this.events.event(bucket, 'Normal', 'BucketRetained', `bucket ${bucketName} is kept: Bucket ${others[0]!.metadata.name} still uses it`);
    } else if (spec?.deletionPolicy === 'Delete' && !service) {
      // Without a running stack the bucket cannot be deleted yet: retry with backoff, unless the stack
      // will never come back (its namespace is going) or has been gone past the deadline.
      const givenUp = await this.stackGivenUp(bucket, namespace);
      if (!givenUp) throw new Error(`cannot delete bucket ${bucketName}: the storage stack is not ready`);
      await this.events.event(
        bucket,
        'Warning',
        'BucketNotDeleted',
        `bucket ${bucketName} was not deleted (${givenUp}): its objects stay where the stack kept them, as with deletionPolicy Retain`,
      );
    } else if (spec?.deletionPolicy === 'Delete' && service) {
      // One chunk per reconcile, then back of the queue: other Buckets are served between chunks, and
      // a lost lease or a deadline never finds a worker deep in an unbounded loop.
      const deletion = await service.deleteBucket(bucketName);
      if (!deletion.gone) {
        await writeStatus(this.kube, this.events, bucket, {
          fields: { ...bucket.status, bucketName, objectCount: deletion.objectsLeft },
          state: 'progressing',
          reason: 'EmptyingBucket',
          message: `deleting bucket ${bucketName} (deletionPolicy Delete): ${deletion.objectsLeft} object(s) left`,
        });
        return { requeueAfterMs: 0 };
      }
      await this.events.event(bucket, 'Normal', 'BucketDeleted', `bucket ${bucketName} emptied and deleted (deletionPolicy Delete)`);
    } else {
      await this.events.event(bucket, 'Normal', 'BucketRetained', `bucket ${bucketName} and its objects are kept (deletionPolicy Retain)`);
    }
    const finalizers = (bucket.metadata.finalizers ?? []).filter((f) => f !== BUCKET_FINALIZER);
    await this.kube.mergePatch(refOf(bucket), { metadata: { finalizers, resourceVersion: bucket.metadata.resourceVersion } });
    return {};
  }
}

/**
 * Why a resource being deleted whose stack is down is released without cleaning up there (undefined:
 * wait): a Delete-policy Bucket without deleting its bucket, an ImageIndex without deleting its key.
 */
export async function stackGivenUpReason(
  kube: KubeClient,
  bucket: KubeObject,
  namespace: string,
  deadlineMs: number,
  now = Date.now(),
): Promise<string | undefined> {
  // A namespace-scoped install may not read Namespaces: the deadline alone then decides.
  const ns = await kube.get<KubeObject>({ apiVersion: 'v1', kind: 'Namespace', namespace: '', name: namespace }).catch(() => undefined);
  if (ns?.metadata.deletionTimestamp) return `namespace ${namespace} is terminating and the storage stack with it`;
  const since = new Date(bucket.metadata.deletionTimestamp ?? now).getTime();
  if (now - since >= deadlineMs) return `the storage stack has not been ready for ${Math.round(deadlineMs / 1000)} s since the deletion began`;
  return undefined;
}

/** The object-store bucket a Bucket resource names: the one it was made with, else spec.bucketName, else its own name. */
function resolvedName(b: Bucket): string {
  return b.metadata.annotations?.[BOUND_ANNOTATIONS.bucketName] ?? (b.spec as { bucketName?: string } | undefined)?.bucketName ?? b.metadata.name;
}

/** What an edit changed of the fields a Bucket was made with (undefined: nothing). */
function immutableChange(b: Bucket, spec: BucketSpec): string | undefined {
  const bound = b.metadata.annotations ?? {};
  const name = spec.bucketName ?? b.metadata.name;
  const boundName = bound[BOUND_ANNOTATIONS.bucketName];
  if (boundName !== undefined && boundName !== name)
    return `spec.bucketName cannot be changed: this resource manages bucket ${boundName} (set it back; ${name} is not created)`;
  const boundBackend = bound[BOUND_ANNOTATIONS.backend];
  if (boundBackend !== undefined && boundBackend !== JSON.stringify(spec.backend))
    return `spec.backend cannot be changed: bucket ${boundName ?? name} was made on ${boundBackend} (set it back)`;
  return undefined;
}

/** Whether `a` claimed its name before `b`: older first, the resource name breaks ties. */
function claimsEarlier(a: Bucket, b: Bucket): boolean {
  const ta = new Date(a.metadata.creationTimestamp ?? 0).getTime();
  const tb = new Date(b.metadata.creationTimestamp ?? 0).getTime();
  return ta !== tb ? ta < tb : a.metadata.name < b.metadata.name;
}
