import { createHash } from 'node:crypto';
import { INDEX_WORKER_DEFAULT_RESOURCES, type ImageIndex, type ImageIndexSpec } from '../api/index.js';
import { STACK } from '../bucket/stack-names.js';
import { stackIdentity } from '../bucket/stack-identity.js';
import { gpuServicePodTemplate, httpService } from '../support/gpu.js';
import type { Manifest } from '../support/kube-client.js';
import { controllerRef, standardLabels } from '../support/ownership.js';
import { imageFor, serviceHost, type OperatorSettings } from '../support/settings.js';
import { RESTRICTED_CONTAINER_SECURITY, SERVICE_UID, restrictedPodSecurity } from '../support/pod-security.js';
import { READER_KEYS, readerSecretName } from './source-reader.js';

export const WORKER_PORT = 8080;
/** The state volume: the index, the model cache and (bucket sources) the mirrored images. */
const STATE_DIR = '/var/lib/strata';
const INDEX_DIR = `${STATE_DIR}/index`;
export const INDEX_LABEL = 'strata.dev/image-index';
export const OPERATION_LABEL = 'strata.dev/index-operation';
/** On a Job run for a merge or rebuild request: the request's value (absent on auto-merges). */
export const REQUEST_ANNOTATION = 'strata.dev/index-request';

/** The namespace's JWT signing secret (the gateway's), for the worker and its Jobs; absent without a storage stack. */
const JWT_SECRET_ENV = { name: 'STRATA_JWT_SECRET', valueFrom: { secretKeyRef: { name: STACK.internalSecret, key: 'STRATA_JWT_SECRET', optional: true } } };

export type IndexOperation = 'merge' | 'rebuild';

export const workerName = (ix: ImageIndex) => `${ix.metadata.name}-index-worker`;
export const stateClaimName = (ix: ImageIndex) => `${ix.metadata.name}-index-state`;
export function workerUrl(ix: ImageIndex, settings: OperatorSettings): string {
  return `http://${serviceHost(settings, workerName(ix), ix.metadata.namespace ?? 'default')}:${WORKER_PORT}`;
}

/** A Job name per operation request: the same request always maps to the same Job (idempotent). */
export function jobName(ix: ImageIndex, op: IndexOperation, token: string): string {
  const hash = createHash('sha256').update(token).digest('hex').slice(0, 10);
  return `${ix.metadata.name}-${op}-${hash}`;
}

function sourceEnv(ix: ImageIndex, spec: ImageIndexSpec, namespace: string, settings: OperatorSettings, indexName: string) {
  const env: object[] = [];
  const s3 = `http://${serviceHost(settings, STACK.gateway.name, namespace)}:${STACK.gateway.port}`;
  const usesBucket = Boolean(spec.source.bucket || spec.model.bucket);
  // A directory is indexed as it is (everything not indexed yet, at start); a bucket prefix is
  // mirrored onto the state volume and synced from there.
  if (spec.source.directory) env.push({ name: 'IMAGE_FILE_DIR', value: spec.source.directory }, { name: 'IMAGE_SEARCH_SCAN_ON_START', value: 'true' });
  if (spec.source.bucket) {
    env.push(
      { name: 'IMAGE_FILE_DIR', value: `${STATE_DIR}/images` },
      { name: 'IMAGE_SEARCH_SOURCE_S3_URL', value: `s3://${spec.source.bucket}/${spec.source.prefix}` },
      // The object store's events make a new object searchable at once (polling stays the safety net):
      // the namespace's RabbitMQ URL when its storage stack exists, and a queue of this index's own.
      { name: 'IMAGE_SEARCH_EVENTS_AMQP_URL', valueFrom: { secretKeyRef: { name: STACK.platformSecret, key: 'STRATA_AMQP_URL', optional: true } } },
      { name: 'IMAGE_SEARCH_EVENTS_QUEUE', value: `strata.image-search.${namespace}.${indexName}` },
      { name: 'IMAGE_SEARCH_EVENTS_EXCHANGE', value: stackIdentity(namespace).exchange },
    );
  }
  if (spec.model.directory) env.push({ name: 'IMAGE_SEARCH_MODEL_DIR', value: spec.model.directory });
  if (spec.model.bucket) env.push({ name: 'IMAGE_SEARCH_MODEL_S3_URL', value: `s3://${spec.model.bucket}/${spec.model.prefix}` });
  if (usesBucket) {
    // The namespace's own object store, with a read-only key scoped to the source (and model) bucket
    // and prefix, never the root's: the reconciler makes it and writes its Secret (source-reader.ts).
    // Until that Secret exists the worker waits (the reference is not optional).
    env.push(
      { name: 'IMAGE_SEARCH_S3_ENDPOINT', value: s3 },
      { name: 'IMAGE_SEARCH_S3_ACCESS_KEY_ID', valueFrom: { secretKeyRef: { name: readerSecretName(ix), key: READER_KEYS.accessKey } } },
      { name: 'IMAGE_SEARCH_S3_SECRET_ACCESS_KEY', valueFrom: { secretKeyRef: { name: readerSecretName(ix), key: READER_KEYS.secretKey } } },
    );
  }
  return env;
}

/** The index worker: state volume, Deployment (one replica: it owns the volume) and Service. */
export function renderImageIndex(ix: ImageIndex, spec: ImageIndexSpec, settings: OperatorSettings): Manifest[] {
  const name = workerName(ix);
  const namespace = ix.metadata.namespace ?? 'default';
  const labels = { ...standardLabels('image-search', ix.metadata.name), [INDEX_LABEL]: ix.metadata.name };
  const selector = { 'app.kubernetes.io/name': 'image-search', 'app.kubernetes.io/instance': ix.metadata.name };
  const owner = [controllerRef(ix)];
  const volumes: object[] = [{ name: 'state', persistentVolumeClaim: { claimName: stateClaimName(ix) } }];
  const mounts: object[] = [{ name: 'state', mountPath: STATE_DIR }];
  if (spec.source.directory && spec.source.volumeClaimName) {
    volumes.push({ name: 'images', persistentVolumeClaim: { claimName: spec.source.volumeClaimName, readOnly: true } });
    mounts.push({ name: 'images', mountPath: spec.source.directory, readOnly: true });
  }
  if (spec.model.directory && spec.model.volumeClaimName) {
    volumes.push({ name: 'model', persistentVolumeClaim: { claimName: spec.model.volumeClaimName, readOnly: true } });
    mounts.push({ name: 'model', mountPath: spec.model.directory, readOnly: true });
  }
  const pvc: Manifest = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: stateClaimName(ix), namespace, labels, ownerReferences: owner },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: spec.storage.size } },
      ...(spec.storage.storageClassName ? { storageClassName: spec.storage.storageClassName } : {}),
    },
  };
  const deployment: Manifest = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels, ownerReferences: owner },
    spec: {
      replicas: 1,
      strategy: { type: 'Recreate' },
      selector: { matchLabels: selector },
      template: gpuServicePodTemplate(labels, spec, settings, {
        component: 'image-search',
        port: WORKER_PORT,
        env: [
          { name: 'IMAGE_SEARCH_INDEX_DIR', value: INDEX_DIR },
          { name: 'IMAGE_SEARCH_MODEL_CACHE_DIR', value: `${STATE_DIR}/model-cache` },
          { name: 'IMAGE_SEARCH_INDEX_STRING', value: spec.index },
          { name: 'IMAGE_SEARCH_NPROBE', value: String(spec.nprobe) },
          { name: 'IMAGE_SEARCH_TOPK', value: String(spec.topk) },
          { name: 'IMAGE_SEARCH_BUFFER_THRESHOLD', value: String(spec.bufferThreshold) },
          // Callers' gateway tokens are checked with it; the merge/rebuild Jobs sign admin tokens with it.
          JWT_SECRET_ENV,
          // FAISS's OpenMP threads must sleep, not spin, between parallel sections.
          { name: 'OMP_WAIT_POLICY', value: 'PASSIVE' },
          ...(spec.gpu.enabled ? [{ name: 'IMAGE_SEARCH_EXECUTION_PROVIDER', value: 'cuda' }] : []),
          ...sourceEnv(ix, spec, namespace, settings, ix.metadata.name ?? name),
        ],
        defaultResources: INDEX_WORKER_DEFAULT_RESOURCES,
        startupFailureThreshold: 60,
        volumeMounts: mounts,
        volumes,
      }),
    },
  };
  const service = httpService({ name, namespace, labels, ownerReferences: owner }, selector, WORKER_PORT);
  return [pvc, deployment, service];
}

/**
 * A merge or rebuild Job. The index state lives on the worker's volume, so the Job asks the worker to
 * run the operation (it swaps in the new index while search goes on) and waits for its outcome.
 * A Job run for a request (`request`: its value) is the record that the request was handled, so it
 * is kept until its ImageIndex goes (no TTL); an auto-merge's Job goes a day after it finished.
 */
export function renderIndexJob(ix: ImageIndex, op: IndexOperation, name: string, settings: OperatorSettings, request?: string): Manifest {
  const namespace = ix.metadata.namespace ?? 'default';
  const labels = { ...standardLabels(`index-${op}`, ix.metadata.name), [INDEX_LABEL]: ix.metadata.name, [OPERATION_LABEL]: op };
  const script = `
const base = process.env.WORKER_URL, op = process.env.INDEX_OPERATION, pollMs = Number(process.env.POLL_MS || 5000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// The worker takes tokens signed with the stack's JWT secret (HS256, as the gateway issues them); the
// role image-search-admin (which the gateway never issues) lets this one change the index.
const { createHmac } = await import('node:crypto');
const part = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
const now = Math.floor(Date.now() / 1000), secret = process.env.STRATA_JWT_SECRET;
const unsigned = part({ alg: 'HS256', typ: 'JWT' }) + '.' + part({ sub: 'strata-operator', role: 'image-search-admin', iat: now, exp: now + 600 });
const headers = secret ? { authorization: 'Bearer ' + unsigned + '.' + createHmac('sha256', secret).update(unsigned).digest('base64url') } : {};
const start = await fetch(base + '/api/index/' + op, { method: 'POST', headers });
if (!start.ok) { console.error(op, 'refused:', start.status, await start.text()); process.exit(1); }
const started = (await start.json()).job?.startedAt;
for (;;) {
  await sleep(pollMs);
  const job = (await (await fetch(base + '/api/index/status')).json()).job;
  if (!job || job.op !== op || job.startedAt !== started) continue;
  console.log(op, job.state, job.phase ?? '', job.progress ?? '');
  if (job.state === 'done') process.exit(0);
  if (job.state === 'failed') { console.error(job.error); process.exit(1); }
}`.trim();
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace,
      labels,
      ...(request !== undefined ? { annotations: { [REQUEST_ANNOTATION]: request } } : {}),
      ownerReferences: [controllerRef(ix)],
    },
    spec: {
      backoffLimit: 2,
      activeDeadlineSeconds: 6 * 3600,
      ...(request === undefined ? { ttlSecondsAfterFinished: 24 * 3600 } : {}),
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          securityContext: restrictedPodSecurity(SERVICE_UID, { fsGroup: false }),
          containers: [
            {
              name: op,
              image: imageFor(settings, 'image-search'),
              imagePullPolicy: settings.imagePullPolicy,
              command: ['node', '--input-type=module', '-e', script],
              env: [{ name: 'WORKER_URL', value: workerUrl(ix, settings) }, { name: 'INDEX_OPERATION', value: op }, JWT_SECRET_ENV],
              resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '128Mi' } },
              securityContext: RESTRICTED_CONTAINER_SECURITY,
            },
          ],
        },
      },
    },
  };
}
