import { createHash } from 'node:crypto';
import type { OwnerReference } from '../api/index.js';
import { oneShotPodTemplate, RESTRICTED_CONTAINER_SECURITY, restrictedPodSecurity } from '../support/pod-security.js';
import type { Manifest } from '../support/kube-client.js';
import { standardLabels } from '../support/ownership.js';
import { STACK, redisShardHost, redisShardName } from './stack-names.js';
import { REDIS_PASSWORD_KEY } from './stack-secrets.js';
import { disruptionBudget, spreadByHost } from './pod-spread.js';
import type { OperatorSettings } from '../support/settings.js';
import { thirdPartyImage } from '../support/third-party-images.js';

/** The uid of the redis image's user. */
const REDIS_UID = 999;

/** Every node of the cluster: the masters and their replicas. */
export const REDIS_NODE_COUNT = STACK.redisShards * (1 + STACK.redisReplicasPerShard);

/** The password, from the stack's Secret, under the name redis-cli reads it from (probes and Job authenticate). */
const REDIS_AUTH_ENV = [{ name: 'REDISCLI_AUTH', valueFrom: { secretKeyRef: { name: STACK.redisSecret, key: REDIS_PASSWORD_KEY } } }];

/** Labels of every Redis pod of the stack (the anti-affinity and the disruption budget select them). */
const REDIS_POD_SELECTOR = { 'app.kubernetes.io/name': 'redis', 'app.kubernetes.io/part-of': 'strata' };

/**
 * Run before redis-server: each peer in nodes.conf gets the address its stable name resolves to now.
 * A node only reaches its peers by the addresses nodes.conf holds; when every pod restarts (a drain)
 * all of them are stale and no node could reach another. The line format is Redis 7's
 * `<id> <ip>:<port>@<bus-port>,<hostname> <flags> ...`; the node's own line is left as it is (the
 * node learns its own address).
 */
export const REWRITE_NODES_CONF = [
  'rewrite_nodes_conf() {',
  'conf="$1"',
  '[ -s "$conf" ] || return 0',
  'out="$conf.new"; : > "$out"',
  'while IFS= read -r line; do',
  '  set -- $line',
  '  addr="$2"; host="${addr#*,}"',
  '  case "$3" in *myself*) host="" ;; esac',
  '  ip=""',
  '  if [ -n "$host" ] && [ "$host" != "$addr" ]; then ip="$(getent hosts "$host" | awk \'{ print $1; exit }\')"; fi',
  '  if [ -n "$ip" ]; then echo "$line" | sed "s|^\\([^ ]*\\) [^:]*:|\\1 $ip:|"; else echo "$line"; fi >> "$out"',
  'done < "$conf"',
  'mv "$out" "$conf"',
  '}',
].join('\n');

/**
 * Redis Cluster with three masters and a replica each, AOF on: one single-pod StatefulSet per node (stable name and volume
 * each), a headless Service per shard, and a Job that joins them once (idempotent: it exits at once
 * when the cluster already reports ok, and repairs a cluster a failed run left half formed).
 * Every node requires the stack's generated password (requirepass, and masterauth for replication),
 * read from its Secret into a config file on stdin: never on a command line or in the manifest.
 */
export function renderRedisCluster(namespace: string, owners: OwnerReference[], settings: Pick<OperatorSettings, 'thirdPartyRegistry'>): Manifest[] {
  const image = thirdPartyImage(settings, 'redis');
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
        // Kept: the nodes resolve each other's names before they are ready (the nodes.conf rewrite at
        // start, when every pod of the cluster restarts at once) and the create Job waits on them by
        // name; clients connect only after authenticating, and the NetworkPolicy admits only the stack.
        publishNotReadyAddresses: true,
      },
    });
    const args = [
      '--port',
      String(STACK.redisPort),
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      NODES_CONF,
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
    ];
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
            affinity: spreadByHost(REDIS_POD_SELECTOR),
            containers: [
              {
                name: 'redis',
                image,
                command: ['sh', '-c', redisStartScript(args), 'redis-start'],
                env: REDIS_AUTH_ENV,
                ports: [
                  { name: 'redis', containerPort: STACK.redisPort, protocol: 'TCP' },
                  { name: 'cluster-bus', containerPort: STACK.redisPort + 10000, protocol: 'TCP' },
                ],
                readinessProbe: { exec: { command: ['sh', '-c', 'redis-cli ping | grep -q PONG'] }, periodSeconds: 5 },
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
  // A drain evicts one Redis pod at a time: its replica (or master) keeps its slots served meanwhile.
  out.push(disruptionBudget('strata-redis', namespace, REDIS_POD_SELECTOR, owners));
  const template = oneShotPodTemplate('redis-cluster-create', REDIS_UID, {
    name: 'cluster-create',
    image,
    command: ['sh', '-c', redisClusterCreateScript(redisClusterNodes(namespace).split(','))],
    env: REDIS_AUTH_ENV,
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

const NODES_CONF = '/data/nodes.conf';

/**
 * The node's container command: nodes.conf's peers re-resolved by name, then redis-server with its
 * password from the environment as a config file on stdin (`-`), so that it shows on no command line.
 */
export function redisStartScript(args: string[], nodesConf = NODES_CONF): string {
  return [
    'set -ef',
    REWRITE_NODES_CONF,
    `rewrite_nodes_conf '${nodesConf}'`,
    `exec redis-server - ${args.map((a) => `'${a}'`).join(' ')} <<EOF`,
    'requirepass $REDISCLI_AUTH',
    'masterauth $REDISCLI_AUTH',
    'EOF',
  ].join('\n');
}

/**
 * The cluster-create Job's script over `nodes` (host:port, masters first). Waits for every node, then:
 * formed (every node ok and knowing all others, every master with its replica): exits at once; never
 * formed or left half formed by a failed run and holding no key: every node reset and the cluster
 * created again (a run that failed midway would otherwise fail the same way every retry); holding
 * keys but not whole: `redis-cli --cluster fix` (uncovered and open slots), and a failure that says
 * what an administrator must look at when that is not enough. Authenticates through REDISCLI_AUTH.
 */
export function redisClusterCreateScript(nodes: string[]): string {
  const n = nodes.length;
  return [
    'set -e',
    `NODES="${nodes.join(' ')}"`,
    'cli() { node="$1"; shift; redis-cli -h "${node%:*}" -p "${node##*:}" "$@"; }',
    'for n in $NODES; do until cli "$n" ping | grep -q PONG; do sleep 2; done; done',
    'formed=yes; keys=0; alone=0',
    'for n in $NODES; do',
    '  info="$(cli "$n" cluster info)"',
    '  echo "$info" | grep -q "^cluster_state:ok" || formed=no',
    `  echo "$info" | grep -q "^cluster_known_nodes:${n}" || formed=no`,
    '  echo "$info" | grep -q "^cluster_known_nodes:1[^0-9]" && alone=$((alone + 1))',
    '  keys=$((keys + $(cli "$n" dbsize | tr -dc 0-9)))',
    'done',
    'first="${NODES%% *}"',
    `[ "$(cli "$first" cluster nodes | grep -c slave)" -eq ${STACK.redisShards * STACK.redisReplicasPerShard} ] || formed=no`,
    'if [ "$formed" = yes ]; then echo "cluster already formed"; exit 0; fi',
    `if [ "$keys" -eq 0 ]; then`,
    `  if [ "$alone" -ne ${n} ]; then echo "cluster half formed and empty: resetting every node"; for n in $NODES; do cli "$n" cluster reset hard; done; fi`,
    `  redis-cli --cluster create $NODES --cluster-replicas ${STACK.redisReplicasPerShard} --cluster-yes`,
    '  exit 0',
    'fi',
    'echo "cluster not whole and holding $keys keys: fixing slots"',
    'redis-cli --cluster fix "$first" --cluster-yes',
    'cli "$first" cluster info | grep -q "^cluster_state:ok" || { echo "cluster still not ok: see redis-cli --cluster check $first" >&2; exit 1; }',
  ].join('\n');
}

/** Seed nodes the services connect to (ioredis discovers the rest of the cluster). */
export function redisClusterNodes(namespace: string): string {
  return Array.from({ length: REDIS_NODE_COUNT }, (_, i) => `${redisShardHost(i, namespace)}:${STACK.redisPort}`).join(',');
}
