import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { env, loadConfig } from '../images/service-kit/src/index.js';
import { DEFAULT_SETTINGS, parseLabels, stackSettingsProblems, type OperatorSettings } from '../controllers/index.js';

/** The operator's environment (the Helm chart sets these). */
export const operatorEnvSchema = z.object({
  PORT: env.port(8080),
  LOG_LEVEL: env.logLevel(),
  /** Watch one namespace only; all namespaces when empty. */
  WATCH_NAMESPACE: z.string().default(''),
  LEADER_ELECTION: env.bool(true),
  LEADER_ELECTION_NAMESPACE: z.string().default('strata-system'),
  LEADER_ELECTION_LEASE_NAME: z.string().default('strata-operator'),
  LEASE_DURATION_SECONDS: env.int(15, 1, 3600),
  RENEW_DEADLINE_SECONDS: env.int(10, 1, 3600),
  RETRY_PERIOD_SECONDS: env.int(2, 1, 3600),
  POD_NAME: z.string().default(hostname()),
  /** Every API server request of the operator ends after this long (client-go's request timeout). */
  KUBE_REQUEST_TIMEOUT_SECONDS: env.int(30, 1, 3600),
  /** A reconcile still running after this long is aborted and retried with backoff (its deadline). */
  RECONCILE_TIMEOUT_SECONDS: env.int(120, 1, 86_400),
  RESYNC_PERIOD_SECONDS: env.int(300, 5, 86_400),
  WORKERS_PER_CONTROLLER: env.int(2, 1, 64),
  STRATA_IMAGE_PREFIX: z.string().default(DEFAULT_SETTINGS.imagePrefix),
  STRATA_IMAGE_TAG: z.string().default(DEFAULT_SETTINGS.imageTag),
  /** Tag suffix of the GPU (CUDA) model-server image; empty: GPU pods run the plain image. */
  STRATA_GPU_IMAGE_SUFFIX: z.string().default(DEFAULT_SETTINGS.gpuImageSuffix),
  /** Registry (and path) of PostgreSQL, RabbitMQ and Redis images, e.g. a private mirror; empty: docker.io/library/. */
  STRATA_THIRD_PARTY_REGISTRY: z.string().default(DEFAULT_SETTINGS.thirdPartyRegistry),
  STRATA_IMAGE_PULL_POLICY: z.enum(['Always', 'IfNotPresent', 'Never']).default(DEFAULT_SETTINGS.imagePullPolicy),
  STRATA_PG_URL: z.string().default(DEFAULT_SETTINGS.postgresUrl),
  /** Read replicas of STRATA_PG_URL, comma-separated (empty: none). */
  STRATA_PG_REPLICA_URLS: z.string().default(''),
  STRATA_AMQP_URL: z.string().default(DEFAULT_SETTINGS.amqpUrl),
  /** The management API of STRATA_AMQP_URL's server, e.g. http://admin:secret@rabbitmq:15672 (empty: that host, port 15672, same user). */
  STRATA_AMQP_MANAGEMENT_URL: z.string().default(DEFAULT_SETTINGS.amqpManagementUrl),
  /** IANA time zone of each stack's 03:00 purge CronJob. */
  STRATA_PURGE_TIME_ZONE: z.string().min(1).default(DEFAULT_SETTINGS.purgeTimeZone),
  /** How long a Delete-policy Bucket being deleted waits for its stack before it is released (Warning event). */
  STACK_DELETION_DEADLINE_SECONDS: env.int(DEFAULT_SETTINGS.stackDeletionDeadlineSeconds, 0, 86_400),
  /** A Bucket whose stack is not ready after this long turns Degraded. */
  PROGRESS_DEADLINE_SECONDS: env.int(DEFAULT_SETTINGS.progressDeadlineSeconds, 1, 86_400),
  STRATA_DATA_VOLUME_SIZE: z.string().default(DEFAULT_SETTINGS.dataVolumeSize),
  /** Gateway replicas per storage stack; above one they are spread over nodes, with a disruption budget. */
  STRATA_GATEWAY_REPLICAS: env.int(DEFAULT_SETTINGS.gatewayReplicas, 1, 50),
  /** Data plane replicas per storage stack; above one only in stacks without fs Buckets (they keep one, on the data volume). */
  STRATA_DATA_PLANE_REPLICAS: env.int(DEFAULT_SETTINGS.dataPlaneReplicas, 1, 50),
  /** Control plane replicas per storage stack; above one they are spread over nodes, with a disruption budget. */
  STRATA_CONTROL_PLANE_REPLICAS: env.int(DEFAULT_SETTINGS.controlPlaneReplicas, 1, 50),
  CLUSTER_DOMAIN: z.string().default(DEFAULT_SETTINGS.clusterDomain),
  /** Each stack gets NetworkPolicies admitting only itself and the peers below (the cluster's network plugin enforces them). */
  NETWORK_POLICIES: env.bool(DEFAULT_SETTINGS.networkPolicy.enabled),
  /** Namespace and pod labels (`k=v,...`) of the ingress controller, admitted to each stack's gateway. */
  INGRESS_CONTROLLER_NAMESPACE: z.string().min(1).default(DEFAULT_SETTINGS.networkPolicy.ingressController.namespace),
  INGRESS_CONTROLLER_POD_LABELS: labelsEnv(DEFAULT_SETTINGS.networkPolicy.ingressController.podLabels),
  /** Namespace and pod labels of Prometheus, admitted to the services' metrics ports. */
  PROMETHEUS_NAMESPACE: z.string().min(1).default(DEFAULT_SETTINGS.networkPolicy.prometheus.namespace),
  PROMETHEUS_POD_LABELS: labelsEnv(DEFAULT_SETTINGS.networkPolicy.prometheus.podLabels),
  /** The operator's own namespace and pod labels, admitted to each stack's control plane (the chart sets them). */
  OPERATOR_NAMESPACE: z.string().min(1).default(DEFAULT_SETTINGS.networkPolicy.operator.namespace),
  OPERATOR_POD_LABELS: labelsEnv(DEFAULT_SETTINGS.networkPolicy.operator.podLabels),
  /** Settings for the storage stack's services: a JSON object of variable → value (the chart's platform.settings). */
  STRATA_STACK_SETTINGS: z
    .string()
    .default('{}')
    .transform((text, ctx): Record<string, string> => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'not JSON: a JSON object of variable names to values' });
        return z.NEVER;
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        ctx.addIssue({ code: 'custom', message: 'a JSON object of variable names to values' });
        return z.NEVER;
      }
      const settings: Record<string, string> = {};
      for (const [name, value] of Object.entries(parsed)) {
        if (!['string', 'number', 'boolean'].includes(typeof value)) ctx.addIssue({ code: 'custom', message: `${name}: a string, number or boolean` });
        else settings[name] = String(value);
      }
      for (const problem of stackSettingsProblems(settings)) ctx.addIssue({ code: 'custom', message: problem });
      return settings;
    }),
});

/** `k=v,...` pod labels (at least one: an empty selector would admit every pod of the namespace). */
function labelsEnv(fallback: Record<string, string>) {
  return z
    .string()
    .default(
      Object.entries(fallback)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    )
    .transform((text, ctx): Record<string, string> => {
      try {
        const labels = parseLabels(text);
        if (Object.keys(labels).length === 0) ctx.addIssue({ code: 'custom', message: 'at least one label key=value' });
        return labels;
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });
}

export type OperatorEnv = z.infer<typeof operatorEnvSchema>;

export function loadOperatorEnv(source: NodeJS.ProcessEnv = process.env): OperatorEnv {
  return loadConfig('operator', operatorEnvSchema, source);
}

export function settingsFrom(cfg: OperatorEnv): OperatorSettings {
  return {
    imagePrefix: cfg.STRATA_IMAGE_PREFIX,
    imageTag: cfg.STRATA_IMAGE_TAG,
    gpuImageSuffix: cfg.STRATA_GPU_IMAGE_SUFFIX,
    imagePullPolicy: cfg.STRATA_IMAGE_PULL_POLICY,
    thirdPartyRegistry: cfg.STRATA_THIRD_PARTY_REGISTRY,
    postgresUrl: cfg.STRATA_PG_URL,
    postgresReplicaUrls: cfg.STRATA_PG_REPLICA_URLS.split(/[\s,]+/).filter(Boolean),
    amqpUrl: cfg.STRATA_AMQP_URL,
    amqpManagementUrl: cfg.STRATA_AMQP_MANAGEMENT_URL,
    dataVolumeSize: cfg.STRATA_DATA_VOLUME_SIZE,
    gatewayReplicas: cfg.STRATA_GATEWAY_REPLICAS,
    dataPlaneReplicas: cfg.STRATA_DATA_PLANE_REPLICAS,
    controlPlaneReplicas: cfg.STRATA_CONTROL_PLANE_REPLICAS,
    clusterDomain: cfg.CLUSTER_DOMAIN,
    stackSettings: cfg.STRATA_STACK_SETTINGS,
    purgeTimeZone: cfg.STRATA_PURGE_TIME_ZONE,
    stackDeletionDeadlineSeconds: cfg.STACK_DELETION_DEADLINE_SECONDS,
    progressDeadlineSeconds: cfg.PROGRESS_DEADLINE_SECONDS,
    networkPolicy: {
      enabled: cfg.NETWORK_POLICIES,
      ingressController: { namespace: cfg.INGRESS_CONTROLLER_NAMESPACE, podLabels: cfg.INGRESS_CONTROLLER_POD_LABELS },
      prometheus: { namespace: cfg.PROMETHEUS_NAMESPACE, podLabels: cfg.PROMETHEUS_POD_LABELS },
      operator: { namespace: cfg.OPERATOR_NAMESPACE, podLabels: cfg.OPERATOR_POD_LABELS },
    },
  };
}

/** Unique per process: two restarts of one pod must not believe they both hold the lease. */
export function leaderIdentity(cfg: OperatorEnv): string {
  return `${cfg.POD_NAME}_${randomBytes(4).toString('hex')}`;
}
