import { createHash } from 'node:crypto';
import type { OwnerReference } from '../api/index.js';
import type { Manifest } from '../support/kube-client.js';
import { scrapeAnnotations, standardLabels } from '../support/ownership.js';
import { DEFAULT_SETTINGS, imageFor, serviceHost, type OperatorSettings } from '../support/settings.js';
import { redisClusterNodes, renderRedisCluster } from './render-redis-cluster.js';
import { oneShotPodTemplate, RESTRICTED_CONTAINER_SECURITY, SERVICE_UID, restrictedPodSecurity } from '../support/pod-security.js';
import { backingUrls, renderBackingServices } from './render-backing-services.js';
import { renderNetworkPolicies } from './render-network-policies.js';
import { STATEFULSET_PROVIDERS, type BackingProviders } from './render-operated-backing.js';
import { PROVIDERS_ANNOTATION, providersRecord } from './backing-providers.js';
import { stackIdentity } from './stack-identity.js';
import { renderStackSecrets, type BackingCredentials } from './stack-secrets.js';
import { PURGE_SCHEDULE, STACK } from './stack-names.js';
import { disruptionBudget, spreadOverHosts } from './pod-spread.js';

/** Default flow-control rules mounted into the gateway (re-read on change, no restart). */
export const DEFAULT_FLOW_RULES = `# Strata gateway flow control. Edit this ConfigMap: the gateway re-reads the file on change.
rateLimits:
  users:
    default: { points: 200, duration: 1 }
concurrency:
  routes:
    GetObject: 256
    PutObject: 128
breakers:
  default: { timeout: 10000, errorThresholdPercentage: 50, resetTimeout: 1000, volumeThreshold: 10 }
  upstreams:
    data-plane: { timeout: 60000 }
`;

const FLOW_RULES_DIR = '/etc/strata/flow-control';

/**
 * The gateway's rules file. Created once and then left to the people who tune it (the operator never
 * overwrites it); like the Secrets it has no owner, so edits survive the stack being recreated.
 */
export function renderFlowRulesConfigMap(namespace: string): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: STACK.flowControl, namespace, labels: standardLabels('gateway', 'strata') },
    data: { 'rules.yaml': DEFAULT_FLOW_RULES },
  };
}

interface Component {
  name: string;
  port: number;
  /** Names the image too. */
  component: string;
  env: Array<{ name: string; value: string }>;
  /** Gets the PostgreSQL and RabbitMQ URLs (the planes; the gateway never talks to either). */
  database: boolean;
  /** Gets the administrator's optional backends Secret (the data plane, which talks to the backends). */
  backends?: boolean;
  volumes?: object[];
  volumeMounts?: object[];
  resources: object;
  /** Above one (stateless services only): spread over nodes, with a disruption budget. */
  replicas?: number;
}

/**
 * The purge CronJob's script: recycled objects older than the retention become DELETED, the control
 * plane does the work as a job. It starts the job (202), waits for it by reading its status every
 * PURGE_POLL_S seconds (PURGE_POLL_MS in its environment overrides it: tests), prints the finished job and exits 0 only when it succeeded, so the Job (and
 * its retries, backoffLimit) report the purge truthfully. A control plane that forgot the job (a
 * restart) answers 404: a failure.
 */
export const PURGE_POLL_S = 2;
const PURGE_COMMAND =
  `const base = process.env.STRATA_CONTROL_PLANE_URL, headers = { 'content-type': 'application/json', ` +
  `'x-strata-internal-token': process.env.STRATA_INTERNAL_TOKEN }; ` +
  `const call = async (path, init) => { const r = await fetch(base + path, { headers, ...init }); const text = await r.text(); ` +
  `if (!r.ok) throw new Error(r.status + ' ' + text); return JSON.parse(text); }; ` +
  `(async () => { let job = await call('/internal/purge', { method: 'POST', body: '{}' }); ` +
  `const pollMs = Number(process.env.PURGE_POLL_MS) || ${PURGE_POLL_S * 1000}; ` +
  `while (job.state === 'running') { await new Promise((s) => setTimeout(s, pollMs)); job = await call('/internal/jobs/' + job.id); } ` +
  `console.log(job.state, JSON.stringify(job)); process.exit(job.state === 'succeeded' ? 0 : 1); })()` +
  `.catch((e) => { console.error(String(e)); process.exit(1); })`;

function deploymentAndService(c: Component, namespace: string, owners: OwnerReference[], settings: OperatorSettings, configHash: string): Manifest[] {
  const labels = standardLabels(c.component, 'strata');
  const selector = { 'app.kubernetes.io/name': c.component, 'app.kubernetes.io/instance': 'strata' };
  const replicas = c.replicas ?? 1;
  const probe = (path: string) => ({ httpGet: { path, port: 'http' }, periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3 });
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: c.name, namespace, labels, ownerReferences: owners },
      spec: {
        replicas,
        // One writer on the data volume (ReadWriteOnce): replace, never overlap.
        strategy: c.volumes?.length ? { type: 'Recreate' } : { type: 'RollingUpdate' },
        selector: { matchLabels: selector },
        template: {
          metadata: {
            labels,
            annotations: {
              ...scrapeAnnotations(c.port),
              // Environment from the ConfigMap and Secret below is read at start: a change rolls the pods.
              [CONFIG_HASH_ANNOTATION]: configHash,
            },
          },
          spec: {
            securityContext: restrictedPodSecurity(SERVICE_UID),
            containers: [
              {
                name: c.component,
                image: imageFor(settings, c.component),
                imagePullPolicy: settings.imagePullPolicy,
                ports: [{ name: 'http', containerPort: c.port, protocol: 'TCP' }],
                envFrom: [
                  { configMapRef: { name: STACK.config } },
                  ...(c.database ? [{ secretRef: { name: STACK.platformSecret } }] : []),
                  ...(c.backends ? [{ secretRef: { name: STACK.backendsSecret, optional: true } }] : []),
                  { secretRef: { name: STACK.rootSecret } },
                  { secretRef: { name: STACK.internalSecret } },
                  // STRATA_REDIS_PASSWORD: every service of the stack is a client of its Redis Cluster.
                  { secretRef: { name: STACK.redisSecret } },
                ],
                env: c.env,
                readinessProbe: probe('/readyz'),
                livenessProbe: probe('/healthz'),
                resources: c.resources,
                ...(c.volumeMounts ? { volumeMounts: c.volumeMounts } : {}),
                securityContext: RESTRICTED_CONTAINER_SECURITY,
              },
            ],
            ...(c.volumes ? { volumes: c.volumes } : {}),
            ...(replicas > 1 ? { topologySpreadConstraints: spreadOverHosts(selector) } : {}),
          },
        },
      },
    },
    // A drain then takes one replica at a time. One replica needs none; one left from a larger count
    // (nothing prunes it) is harmless: maxUnavailable 1 still lets a drain move a lone pod.
    ...(replicas > 1 ? [disruptionBudget(c.name, namespace, selector, owners)] : []),
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: c.name, namespace, labels, ownerReferences: owners },
      spec: { type: 'ClusterIP', selector, ports: [{ name: 'http', port: c.port, targetPort: 'http', protocol: 'TCP' }] },
    },
  ];
}

/** Pod-template annotation: a digest of the environment the stack's services read from ConfigMap and Secret. */
export const CONFIG_HASH_ANNOTATION = 'strata.dev/config-hash';

/** The stack's own settings (the ConfigMap every service of the stack reads). */
function operatorConfig(namespace: string, settings: OperatorSettings): Record<string, string> {
  const url = (svc: { name: string; port: number }) => `http://${serviceHost(settings, svc.name, namespace)}:${svc.port}`;
  const identity = stackIdentity(namespace);
  return {
    // The namespace's own exchange and queues: a shared broker never mixes two namespaces' events.
    STRATA_AMQP_EXCHANGE: identity.exchange,
    STRATA_AMQP_QUEUE_PREFIX: identity.queuePrefix,
    // Seed nodes of the Redis Cluster below (the gateway's shared rate limits, the control plane's cache).
    STRATA_REDIS_NODES: redisClusterNodes(namespace),
    // Every shard has a replica: a multipart part is acknowledged only once a replica has it, so a failover loses none.
    STRATA_REDIS_REPLICA_ACKS: '1',
    // The planes are separate processes: a replica read must cover every commit made before it.
    STRATA_PG_READ_CONSISTENCY: 'latest',
    STRATA_CONTROL_PLANE_URL: url(STACK.controlPlane),
    STRATA_DATA_PLANE_URL: url(STACK.dataPlane),
    STRATA_DATA_DIR: '/data',
    STRATA_GATEWAY_RULES_FILE: `${FLOW_RULES_DIR}/rules.yaml`,
    // Under the operator the CronJob below purges the recycle bin; the in-process job stays off.
    STRATA_PURGE_CRON_ENABLED: 'false',
    // Several data planes share no volume: both planes refuse fs buckets rather than keep bytes on scratch space.
    ...(settings.dataPlaneReplicas > 1 ? { STRATA_FS_BACKEND: 'false' } : {}),
  };
}

/**
 * Every variable the operator gives the stack's containers itself (its ConfigMap, the connection and
 * key Secrets, each container's own env): the administrator's stack settings may not replace them.
 */
export const OPERATOR_STACK_VARIABLES: ReadonlySet<string> = new Set([
  // With the keys only replicated data planes get (STRATA_FS_BACKEND).
  ...Object.keys(operatorConfig('namespace', { ...DEFAULT_SETTINGS, dataPlaneReplicas: 2 })),
  'STRATA_PG_URL',
  'STRATA_PG_REPLICA_URLS',
  'STRATA_AMQP_URL',
  ...renderStackSecrets('namespace').flatMap((s) => Object.keys(s.stringData as Record<string, string>)),
  'STRATA_GATEWAY_PORT',
  'PORT',
]);

/** What is wrong with a set of stack settings (empty: nothing). */
export function stackSettingsProblems(settings: Readonly<Record<string, string>>): string[] {
  return Object.keys(settings).flatMap((name) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return [`${name}: not an environment variable name`];
    if (OPERATOR_STACK_VARIABLES.has(name)) return [`${name}: set by the operator itself`];
    if (name.startsWith('STRATA_BACKEND_')) return [`${name}: backend settings carry credentials; put them in the ${STACK.backendsSecret} Secret`];
    return [];
  });
}

/**
 * The namespace's object storage stack: configuration (connection URLs in a Secret), the gateway,
 * data plane and control plane (Deployment + Service each), the Redis Cluster and the daily purge
 * CronJob. Owned by every Bucket
 * of the namespace together, so it goes when the last Bucket goes. The data volume (and the Secrets,
 * see stack-secrets.ts) carry no owner: retained buckets keep their bytes.
 */
export function renderStorageStack(
  namespace: string,
  owners: OwnerReference[],
  settings: OperatorSettings,
  credentials: BackingCredentials,
  providers: BackingProviders = STATEFULSET_PROVIDERS,
): Manifest[] {
  const identity = stackIdentity(namespace);
  const urls = backingUrls(namespace, settings, identity, credentials, providers);
  const small = { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } };
  const config: Manifest = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: STACK.config,
      namespace,
      labels: standardLabels('storage-stack', 'strata'),
      // Which provider holds the stack's data, so that it is kept (backing-providers.ts).
      annotations: { [PROVIDERS_ANNOTATION]: providersRecord(providers) },
      ownerReferences: owners,
    },
    // The administrator's settings first: they never name a variable the operator sets (checked at start).
    data: { ...settings.stackSettings, ...operatorConfig(namespace, settings) },
  };
  const b64 = (value: string) => Buffer.from(value, 'utf8').toString('base64');
  // Applied on every reconcile (the operator's settings may change); `data`, not `stringData`, so that
  // server-side apply owns exactly these keys and drops STRATA_PG_REPLICA_URLS when it goes.
  const platform: Manifest = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: STACK.platformSecret, namespace, labels: standardLabels('storage-stack', 'strata'), ownerReferences: owners },
    type: 'Opaque',
    data: {
      STRATA_PG_URL: b64(urls.postgresUrl),
      ...(urls.postgresReplicaUrls.length ? { STRATA_PG_REPLICA_URLS: b64(urls.postgresReplicaUrls.join(',')) } : {}),
      STRATA_AMQP_URL: b64(urls.amqpUrl),
    },
  };
  // The generated passwords never change, so the hash leaves them out: `operator render`, which has
  // no cluster to read them from, computes the same hash as the operator.
  const withoutPasswords = backingUrls(namespace, settings, identity, { postgresPassword: '', rabbitmqPassword: '' }, providers);
  const configHash = createHash('sha256')
    .update(JSON.stringify([config.data, withoutPasswords]))
    .digest('hex')
    .slice(0, 16);
  const dataVolume: Manifest = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: STACK.dataVolume, namespace, labels: standardLabels('data-plane', 'strata') },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: settings.dataVolumeSize } } },
  };
  const workload = (component: string, stack: { name: string; port: number }, c: Omit<Component, 'name' | 'port' | 'component'>) =>
    deploymentAndService({ ...stack, component, ...c }, namespace, owners, settings, configHash);
  const gateway = workload('gateway', STACK.gateway, {
    database: false,
    replicas: settings.gatewayReplicas,
    env: [{ name: 'STRATA_GATEWAY_PORT', value: String(STACK.gateway.port) }],
    // A directory mount (not subPath) so that ConfigMap edits reach the running pod.
    volumes: [{ name: 'flow-control', configMap: { name: STACK.flowControl } }],
    volumeMounts: [{ name: 'flow-control', mountPath: FLOW_RULES_DIR, readOnly: true }],
    resources: small,
  });
  // The gateway is stateless: the rolling strategy applies despite its ConfigMap volume.
  (gateway[0]!.spec as { strategy: object }).strategy = { type: 'RollingUpdate' };
  // One data plane holds the ReadWriteOnce volume (fs Buckets: plane-replicas.ts decides); several hold
  // none, only scratch space, and roll like the other stateless services.
  const onVolume = settings.dataPlaneReplicas <= 1;
  const dataPlane = workload('data-plane', STACK.dataPlane, {
    database: true,
    backends: true,
    replicas: settings.dataPlaneReplicas,
    env: [{ name: 'PORT', value: String(STACK.dataPlane.port) }],
    volumes: [onVolume ? { name: 'data', persistentVolumeClaim: { claimName: STACK.dataVolume } } : { name: 'data', emptyDir: {} }],
    volumeMounts: [{ name: 'data', mountPath: '/data' }],
    resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } },
  });
  if (!onVolume) (dataPlane[0]!.spec as { strategy: object }).strategy = { type: 'RollingUpdate' };
  const controlPlane = workload('control-plane', STACK.controlPlane, {
    database: true,
    replicas: settings.controlPlaneReplicas,
    env: [{ name: 'PORT', value: String(STACK.controlPlane.port) }],
    resources: small,
  });
  const purge: Manifest = {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: STACK.purgeCronJob, namespace, labels: standardLabels('purge', 'strata'), ownerReferences: owners },
    spec: {
      schedule: PURGE_SCHEDULE,
      timeZone: settings.purgeTimeZone,
      concurrencyPolicy: 'Forbid',
      successfulJobsHistoryLimit: 3,
      failedJobsHistoryLimit: 3,
      jobTemplate: {
        spec: {
          backoffLimit: 3,
          template: oneShotPodTemplate('purge', SERVICE_UID, {
            name: 'purge',
            image: imageFor(settings, 'control-plane'),
            command: ['node', '-e', PURGE_COMMAND],
            envFrom: [{ configMapRef: { name: STACK.config } }, { secretRef: { name: STACK.internalSecret } }],
            resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '256Mi' } },
          }),
        },
      },
    },
  };
  return [
    config,
    platform,
    // Not created for a stack that needs none; one made before has no owner and keeps its bytes.
    ...(onVolume ? [dataVolume] : []),
    ...renderBackingServices(namespace, owners, settings, identity, credentials, providers),
    ...controlPlane,
    ...dataPlane,
    ...gateway,
    ...renderRedisCluster(namespace, owners, settings),
    purge,
    ...renderNetworkPolicies(namespace, owners, settings.networkPolicy),
  ];
}
