/** Names and ports of the per-namespace storage stack (shared by every Bucket of the namespace). */
export const STACK = {
  gateway: { name: 'strata-gateway', port: 9000 },
  dataPlane: { name: 'strata-data-plane', port: 9001 },
  controlPlane: { name: 'strata-control-plane', port: 9002 },
  config: 'strata-config',
  /** Connection URLs with passwords (PostgreSQL, RabbitMQ), from the operator's settings. */
  platformSecret: 'strata-platform',
  flowControl: 'strata-flow-control',
  /**
   * Server-wide storage backends for buckets that S3 clients create (`STRATA_BACKEND_MINIO_*`,
   * `STRATA_BACKEND_CLOUD_*`): a Secret the administrator creates in the namespace, optional; never
   * rendered or owned by the operator.
   */
  backendsSecret: 'strata-backends',
  rootSecret: 'strata-root-credentials',
  /** The passwords of the namespace's own database role and broker user (generated once). */
  backingSecret: 'strata-backing-credentials',
  /** The bundled PostgreSQL (primary and streaming replica) and RabbitMQ, when no external URL is set. */
  postgres: { name: 'strata-postgresql', port: 5432 },
  postgresReplica: 'strata-postgresql-replica',
  postgresConfig: 'strata-postgresql-config',
  rabbitmq: { name: 'strata-rabbitmq', port: 5672 },
  internalSecret: 'strata-internal',
  /** The Redis Cluster's password (requirepass and masterauth; generated once, read by every client). */
  redisSecret: 'strata-redis-credentials',
  dataVolume: 'strata-data',
  purgeCronJob: 'strata-purge',
  /** Redis Cluster: 3 masters, each with one replica (6 single-pod StatefulSets, AOF on). */
  redisShards: 3,
  redisReplicasPerShard: 1,
  redisPort: 6379,
  /** Prefix of the cluster-forming Job; a digest of its pod template completes the name (a Job's template is immutable). */
  redisClusterJob: 'strata-redis-cluster-create',
} as const;

export const redisShardName = (i: number) => `strata-redis-${i}`;
/** Stable DNS name of shard i's only pod (StatefulSet pod behind its headless Service). */
export const redisShardHost = (i: number, namespace: string) => `${redisShardName(i)}-0.${redisShardName(i)}.${namespace}.svc`;

/** The purge of the recycle bin runs daily at 03:00, as in standalone mode. */
export const PURGE_SCHEDULE = '0 3 * * *';
