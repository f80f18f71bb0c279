import type { OwnerReference } from '../api/index.js';
import type { Manifest } from '../support/kube-client.js';
import { standardLabels } from '../support/ownership.js';
import { STACK, redisShardHost, redisShardName } from './stack-names.js';

const REDIS_IMAGE = 'redis:7.2-alpine';

/**
 * Redis Cluster with three masters: one single-pod StatefulSet per shard (stable name and volume
 * each), a headless Service per shard, and a Job that joins them once (idempotent: it exits at once
 * when the cluster already reports ok).
 */
export function renderRedisCluster(namespace: string, owners: OwnerReference[]): Manifest[] {
  const out: Manifest[] = [];
  for (let i = 0; i < STACK.redisShards; i++) {
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
            securityContext: { runAsNonRoot: true, runAsUser: 999, fsGroup: 999 },
            containers: [
              {
                name: 'redis',
                image: REDIS_IMAGE,
                args: [
                  '--port', String(STACK.redisPort),
                  '--cluster-enabled', 'yes',
                  '--cluster-config-file', '/data/nodes.conf',
                  '--cluster-announce-hostname', redisShardHost(i, namespace),
                  '--cluster-preferred-endpoint-type', 'hostname',
                  '--appendonly', 'yes',
                ],
                ports: [
                  { name: 'redis', containerPort: STACK.redisPort, protocol: 'TCP' },
                  { name: 'cluster-bus', containerPort: STACK.redisPort + 10000, protocol: 'TCP' },
                ],
                readinessProbe: { exec: { command: ['redis-cli', 'ping'] }, periodSeconds: 5 },
                livenessProbe: { tcpSocket: { port: 'redis' }, periodSeconds: 10 },
                resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } },
                volumeMounts: [{ name: 'data', mountPath: '/data' }],
                securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
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
    'redis-cli --cluster create $NODES --cluster-replicas 0 --cluster-yes',
  ].join('\n');
  out.push({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: STACK.redisClusterJob, namespace, labels: standardLabels('redis-cluster-create', 'strata'), ownerReferences: owners },
    spec: {
      backoffLimit: 20,
      template: {
        metadata: { labels: standardLabels('redis-cluster-create', 'strata') },
        spec: {
          restartPolicy: 'OnFailure',
          securityContext: { runAsNonRoot: true, runAsUser: 999 },
          containers: [{ name: 'cluster-create', image: REDIS_IMAGE, command: ['sh', '-c', script] }],
        },
      },
    },
  });
  return out;
}

/** Seed nodes the services connect to (ioredis discovers the rest of the cluster). */
export function redisClusterNodes(namespace: string): string {
  return Array.from({ length: STACK.redisShards }, (_, i) => `${redisShardHost(i, namespace)}:${STACK.redisPort}`).join(',');
}
