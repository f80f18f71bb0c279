/** Operator-wide settings the reconcilers render with (from the operator's environment). */
export interface OperatorSettings {
  /** Registry and repository prefix of Strata images, e.g. "ghcr.io/strata-dev/". */
  imagePrefix: string;
  imageTag: string;
  /**
   * Appended to the tag of the model-server image for ModelServers that ask for a GPU: the variant
   * with onnxruntime's CUDA provider and the CUDA runtime (hack/build-images.sh with CUDA=1). Empty:
   * GPU pods run the plain image (which falls back to the CPU).
   */
  gpuImageSuffix: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  /** Registry (and path) of the third-party images, PostgreSQL, RabbitMQ and Redis; empty: Docker Hub (third-party-images.ts). */
  thirdPartyRegistry: string;
  /**
   * Storage stack: an external PostgreSQL server (its administrator's URL: the operator creates a
   * role and database per namespace there, and the namespace's services get only those), its hot
   * standbys (read replicas, may be empty), and an external RabbitMQ URL (each namespace gets its own
   * exchange and queues there). Empty: each namespace's stack runs its own PostgreSQL (primary and
   * streaming replica) and RabbitMQ.
   */
  postgresUrl: string;
  postgresReplicaUrls: string[];
  amqpUrl: string;
  /** RabbitMQ's management API (administrator credentials) for amqpUrl's server; empty: derived from amqpUrl (port 15672). */
  amqpManagementUrl: string;
  /** Size of the data plane's volume (fs backend). */
  dataVolumeSize: string;
  /**
   * Replicas of each stack's gateway (stateless: its rate limits are shared through Redis). Above one
   * they are spread over nodes and a disruption budget keeps all but one through a drain.
   */
  gatewayReplicas: number;
  /**
   * Replicas of each stack's data plane. Above one it holds no volume (object-store and cloud backends
   * only): a stack with an fs Bucket keeps one data plane on its ReadWriteOnce volume (plane-replicas.ts).
   */
  dataPlaneReplicas: number;
  /** Replicas of each stack's control plane (its admin jobs are shared through the stack's Redis). */
  controlPlaneReplicas: number;
  /** Cluster DNS suffix for endpoints in status. */
  clusterDomain: string;
  /**
   * The administrator's settings for the storage stack's services (STRATA_S3_DOMAINS,
   * STRATA_BUCKET_CACHE_MS, LOG_LEVEL, ...; README): added to the stack's ConfigMap, which every
   * service reads; each service takes what it knows. Never the variables the operator sets itself.
   */
  stackSettings: Readonly<Record<string, string>>;
  /** IANA time zone of the daily 03:00 purge CronJob. */
  purgeTimeZone: string;
  /**
   * How long a Delete-policy Bucket being deleted waits for its stack to be ready before it is
   * released without deleting its bucket (a Warning event says so).
   */
  stackDeletionDeadlineSeconds: number;
  /** A Bucket whose stack has not become ready for this long is Degraded (StackNotReady), no longer Progressing. */
  progressDeadlineSeconds: number;
  /** Who may reach a stack's pods besides the stack itself (its NetworkPolicies). */
  networkPolicy: NetworkPolicySettings;
}

/** Pods of one namespace, by labels. */
export interface PeerSettings {
  namespace: string;
  podLabels: Record<string, string>;
}

/** Each stack's NetworkPolicies (render-network-policies.ts): on by default; the peers they admit. */
export interface NetworkPolicySettings {
  enabled: boolean;
  /** Reaches the gateway (the S3 endpoint). */
  ingressController: PeerSettings;
  /** Scrapes the services' /metrics. */
  prometheus: PeerSettings;
  /** The operator's own pods: they call the control plane's internal API. */
  operator: PeerSettings;
}

export const DEFAULT_SETTINGS: OperatorSettings = {
  imagePrefix: 'ghcr.io/strata-dev/',
  imageTag: '0.2.0',
  gpuImageSuffix: '-cuda',
  imagePullPolicy: 'IfNotPresent',
  thirdPartyRegistry: '',
  postgresUrl: '',
  postgresReplicaUrls: [],
  amqpUrl: '',
  amqpManagementUrl: '',
  dataVolumeSize: '20Gi',
  gatewayReplicas: 1,
  dataPlaneReplicas: 1,
  controlPlaneReplicas: 1,
  clusterDomain: 'cluster.local',
  stackSettings: {},
  purgeTimeZone: 'UTC',
  stackDeletionDeadlineSeconds: 600,
  progressDeadlineSeconds: 600,
  // ingress-nginx's and kube-prometheus-stack's usual namespaces and labels; the chart sets its own.
  networkPolicy: {
    enabled: true,
    ingressController: { namespace: 'ingress-nginx', podLabels: { 'app.kubernetes.io/name': 'ingress-nginx' } },
    prometheus: { namespace: 'monitoring', podLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    operator: { namespace: 'strata-system', podLabels: { 'app.kubernetes.io/name': 'strata-operator' } },
  },
};

/** `a=b,c=d` → labels; throws on an entry that is not `key=value`. */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const entry of text
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const m = /^([A-Za-z0-9./_-]+)=([A-Za-z0-9._-]*)$/.exec(entry);
    if (!m) throw new Error(`"${entry}" is not a label key=value`);
    labels[m[1]!] = m[2]!;
  }
  return labels;
}

export function imageFor(settings: OperatorSettings, name: string, variant: 'cpu' | 'gpu' = 'cpu'): string {
  return `${settings.imagePrefix}${name}:${settings.imageTag}${variant === 'gpu' ? settings.gpuImageSuffix : ''}`;
}

export function serviceHost(settings: OperatorSettings, service: string, namespace: string): string {
  return `${service}.${namespace}.svc.${settings.clusterDomain}`;
}
