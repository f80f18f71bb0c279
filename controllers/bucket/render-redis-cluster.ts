import { createHash } from 'node:crypto';
import type { OwnerReference } from '../api/index.js';
import { oneShotPodTemplate, RESTRICTED_CONTAINER_SECURITY, restrictedPodSecurity } from '../support/pod-security.js';
import type { Manifest } from '../support/kube-client.js';
import { standardLabels } from '../support/ownership.js';
import { STACK, redisShardHost, redisShardName } from './stack-names.js';

const REDIS_IMAGE = 'redis:7.2-alpine';
/** The uid of the redis image's user. */
const REDIS_UID = 999;

/** Every node of the cluster: the masters and their replicas. */
export const REDIS_NODE_COUNT = STACK.redisShards * (1 + STACK.redisReplicasPerShard);

/**
 * Redis Cluster with three masters and a replica each, AOF on: one single-pod StatefulSet per node (stable name and volume
 * each), a headless Service per shard, and a Job that joins them once (idempotent: it exits at once
 * when the cluster already reports ok).
 */
export function renderRedisCluster(namespace: string, owners: OwnerReference[]): Manifest[] {
  const out: Manifest[] = [];
  for (let i = 0; i < REDIS_NODE_COUNT; i++) {
    const name = redisShardName(i);
    const labels = { ...standardLabels('redis', name), 'strata.dev/redis-shard': String(i) };
    const selector = { 'app.kubernetes.io/name': 'redis', 'app.kubernetes.io/instance': name };
    out.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace, labels, ownerReferences: owners },
      spec: {
        clusterIP: 'None',
        selector,
        ports: [
          { name: 'redis', port: STACK.redisPort, targetPort: 'redis', protocol: 'TCP' },
          { name: 'cluster-bus', port: STACK.redisPort + 10000, targetPort: 'cluster-bus', protocol: 'TCP' },
        ],
        publishNotReadyAddresses: true,
      },
    });
    out.push({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name, namespace, labels, ownerReferences: owners },
      spec: {
        serviceName: name,
        replicas: 1,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels },
          spec: {
            securityContext: restrictedPodSecurity(REDIS_UID),
            containers: [
              {
                name: 'redis',
                image: REDIS_IMAGE,
                args: [
                  '--port',
                  String(STACK.redisPort),
                  '--cluster-enabled',
                  'yes',
                  '--cluster-config-file',
                  '/data/nodes.conf',
                  '--cluster-announce-hostname',
                  redisShardHost(i, namespace),
                  '--cluster-preferred-endpoint-type',
                  'hostname',
                  '--appendonly',
                  'yes',
                  // Fsynced before the reply: a master with no live replica takes multipart writes on
                  // its AOF alone, and with `everysec` a loaded disk postpones the write past the reply
                  // (up to 2 s), so a crash lost acknowledged parts. Multipart writes are few (one a part).
                  '--appendfsync',
                  'always',
                  // A dead master's replica takes over after this long (plus the election and the clients'
                  // slot refresh, about 2 s): when multipart works again on its slots (Redis's default: 15 s).
                  '--cluster-node-timeout',
                  '5000',
                ],
                ports: [
                  { name: 'redis', containerPort: STACK.redisPort, protocol: 'TCP' },
                  { name: 'cluster-bus', containerPort: STACK.redisPort + 10000, protocol: 'TCP' },
                ],
                readinessProbe: { exec: { command: ['redis-cli', 'ping'] }, periodSeconds: 5 },
                livenessProbe: { tcpSocket: { port: 'redis' }, periodSeconds: 10 },
                resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } },
                volumeMounts: [{ name: 'data', mountPath: '/data' }],
                securityContext: RESTRICTED_CONTAINER_SECURITY,
              },
            ],
          },
        },
        volumeClaimTemplates: [
          {
            apiVersion: 'v1',
            kind: 'PersistentVolumeClaim',
            metadata: { name: 'data' },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
          },
        ],
      },
    });
  }
  const nodes = redisClusterNodes(namespace).split(',');
  // Every node as host:port, split by the shell: the script names each node exactly once.
  const script = [
    'set -e',
    `NODES="${nodes.join(' ')}"`,
    'for n in $NODES; do until redis-cli -h "${n%:*}" -p "${n##*:}" ping; do sleep 2; done; done',
    'first="${NODES%% *}"',
    'if redis-cli -h "${first%:*}" -p "${first##*:}" cluster info | grep -q cluster_state:ok; then echo "cluster already formed"; exit 0; fi',
    `redis-cli --cluster create $NODES --cluster-replicas ${STACK.redisReplicasPerShard} --cluster-yes`,
  ].join('\n');
  const template = oneShotPodTemplate('redis-cluster-create', REDIS_UID, {
    name: 'cluster-create',
    image: REDIS_IMAGE,
    command: ['sh', '-c', script],
    resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '128Mi' } },
  });
  const digest = createHash('sha256').update(JSON.stringify(template)).digest('hex').slice(0, 10);
  out.push({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: `${STACK.redisClusterJob}-${digest}`, namespace, labels: standardLabels('redis-cluster-create', 'strata'), ownerReferences: owners },
    spec: { backoffLimit: 20, template },
  });
  return out;
}

/** Seed nodes the services connect to (ioredis discovers the rest of the cluster). */
export function redisClusterNodes(namespace: string): string {
  return Array.from({ length: REDIS_NODE_COUNT }, (_, i) => `${redisShardHost(i, namespace)}:${STACK.redisPort}`).join(',');
}
