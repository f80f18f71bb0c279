import type { OwnerReference } from '../api/index.js';
import type { Manifest } from '../support/kube-client.js';
import { standardLabels } from '../support/ownership.js';
import { RESTRICTED_CONTAINER_SECURITY, restrictedPodSecurity } from '../support/pod-security.js';
import { serviceHost, type OperatorSettings } from '../support/settings.js';
import { thirdPartyImage } from '../support/third-party-images.js';
import type { StackIdentity } from './stack-identity.js';
import { BACKING_KEYS, type BackingCredentials } from './stack-secrets.js';
import { STACK } from './stack-names.js';
import { disruptionBudget, spreadByHost } from './pod-spread.js';
import {
  cnpgPrimaryService,
  cnpgReplicaService,
  renderCnpgCluster,
  renderRabbitmqCluster,
  STATEFULSET_PROVIDERS,
  type BackingProviders,
} from './render-operated-backing.js';

/** The uid both official images run their server as. */
const IMAGE_UID = 999;
const PGDATA = '/var/lib/postgresql/data/pgdata';

/** Whether the namespace's stack runs its own PostgreSQL and RabbitMQ (no external URL given). */
export const bundledPostgres = (settings: OperatorSettings) => settings.postgresUrl === '';
export const bundledRabbitmq = (settings: OperatorSettings) => settings.amqpUrl === '';

export interface BackingUrls {
  postgresUrl: string;
  postgresReplicaUrls: string[];
  amqpUrl: string;
}

/** `url` with the stack's own role, password and database in place of the administrator's. */
function asStackRole(url: string, identity: StackIdentity, password: string): string {
  const u = new URL(url);
  u.username = identity.role;
  u.password = password;
  u.pathname = `/${identity.database}`;
  return u.toString();
}

/**
 * The connection URLs the namespace's services get: always the namespace's own role and database
 * (on the bundled servers, or on the external server where the operator created them), and its own
 * broker user on the bundled RabbitMQ, or its own user and vhost on the external one (the operator
 * creates them there: the administrator's URL never reaches a namespace).
 */
export function backingUrls(
  namespace: string,
  settings: OperatorSettings,
  identity: StackIdentity,
  credentials: BackingCredentials,
  providers: BackingProviders = STATEFULSET_PROVIDERS,
): BackingUrls {
  const host = (name: string) => serviceHost(settings, name, namespace);
  const pg = (hostName: string) => `postgres://${hostName}:${STACK.postgres.port}`;
  const cnpg = providers.postgres === 'cloudnative-pg';
  return bundledPostgres(settings)
    ? {
        postgresUrl: asStackRole(pg(host(cnpg ? cnpgPrimaryService : STACK.postgres.name)), identity, credentials.postgresPassword),
        postgresReplicaUrls: [asStackRole(pg(host(cnpg ? cnpgReplicaService : STACK.postgresReplica)), identity, credentials.postgresPassword)],
        amqpUrl: bundledRabbitmq(settings)
          ? rabbitmqUrl(namespace, settings, identity, credentials)
          : asSharedBrokerUser(settings.amqpUrl, identity, credentials.rabbitmqPassword),
      }
    : {
        postgresUrl: asStackRole(settings.postgresUrl, identity, credentials.postgresPassword),
        postgresReplicaUrls: settings.postgresReplicaUrls.map((u) => asStackRole(u, identity, credentials.postgresPassword)),
        amqpUrl: bundledRabbitmq(settings)
          ? rabbitmqUrl(namespace, settings, identity, credentials)
          : asSharedBrokerUser(settings.amqpUrl, identity, credentials.rabbitmqPassword),
      };
}

/** The external broker's `url` with the stack's own user, password and vhost in place of the administrator's. */
function asSharedBrokerUser(url: string, identity: StackIdentity, password: string): string {
  const u = new URL(url);
  u.username = encodeURIComponent(identity.sharedBrokerUser);
  u.password = encodeURIComponent(password);
  u.pathname = `/${encodeURIComponent(identity.sharedBrokerVhost)}`;
  return u.toString();
}

function rabbitmqUrl(namespace: string, settings: OperatorSettings, identity: StackIdentity, credentials: BackingCredentials): string {
  return `amqp://${identity.brokerUser}:${credentials.rabbitmqPassword}@${serviceHost(settings, STACK.rabbitmq.name, namespace)}:${STACK.rabbitmq.port}`;
}

/** Every pod of one of the stack's servers (PostgreSQL's primary and replica together). */
const componentPods = (component: string) => ({ 'app.kubernetes.io/name': component, 'app.kubernetes.io/part-of': 'strata' });

const passwordFrom = (key: string) => ({ valueFrom: { secretKeyRef: { name: STACK.backingSecret, key } } });

interface ServerSpec {
  name: string;
  component: string;
  port: { name: string; containerPort: number };
  image: string;
  env: object[];
  args?: string[];
  initContainers?: object[];
  volumeMountPath: string;
  extraVolumes?: object[];
  extraMounts?: object[];
  readiness: object;
  /** Fails only when the server no longer answers (a server still starting or recovering is alive). */
  liveness: object;
  storage: string;
}

/** One single-pod StatefulSet with its volume and a Service in front. */
function server(s: ServerSpec, namespace: string, owners: OwnerReference[]): Manifest[] {
  const labels = standardLabels(s.component, s.name);
  const selector = { 'app.kubernetes.io/name': s.component, 'app.kubernetes.io/instance': s.name };
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: s.name, namespace, labels, ownerReferences: owners },
      spec: { type: 'ClusterIP', selector, ports: [{ name: s.port.name, port: s.port.containerPort, targetPort: s.port.name, protocol: 'TCP' }] },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: s.name, namespace, labels, ownerReferences: owners },
      spec: {
        serviceName: s.name,
        replicas: 1,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels },
          spec: {
            securityContext: restrictedPodSecurity(IMAGE_UID),
            // The primary and its replica on different nodes: one drain never takes both.
            affinity: spreadByHost(componentPods(s.component)),
            ...(s.initContainers ? { initContainers: s.initContainers } : {}),
            containers: [
              {
                name: s.component,
                image: s.image,
                ...(s.args ? { args: s.args } : {}),
                env: s.env,
                ports: [{ ...s.port, protocol: 'TCP' }],
                readinessProbe: s.readiness,
                livenessProbe: s.liveness,
                resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '1Gi' } },
                volumeMounts: [{ name: 'data', mountPath: s.volumeMountPath }, ...(s.extraMounts ?? [])],
                securityContext: RESTRICTED_CONTAINER_SECURITY,
              },
            ],
            ...(s.extraVolumes ? { volumes: s.extraVolumes } : {}),
          },
        },
        volumeClaimTemplates: [
          {
            apiVersion: 'v1',
            kind: 'PersistentVolumeClaim',
            metadata: { name: 'data' },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: s.storage } } },
          },
        ],
      },
    },
  ];
}

/**
 * The namespace's own PostgreSQL (a primary and a streaming replica, each a StatefulSet) and
 * RabbitMQ, when the operator was given no external URL for them: the first install needs nothing
 * preinstalled, and each namespace's data lives on its own servers. Where the cluster runs
 * CloudNativePG or the RabbitMQ cluster operator (`providers`), their resources instead.
 */
export function renderBackingServices(
  namespace: string,
  owners: OwnerReference[],
  settings: OperatorSettings,
  identity: StackIdentity,
  credentials: BackingCredentials,
  providers: BackingProviders = STATEFULSET_PROVIDERS,
): Manifest[] {
  const out: Manifest[] = [];
  if (bundledPostgres(settings) && providers.postgres === 'cloudnative-pg') out.push(...renderCnpgCluster(namespace, owners, settings, identity, credentials));
  else if (bundledPostgres(settings)) {
    const pgEnv = [
      { name: 'PGDATA', value: PGDATA },
      { name: 'POSTGRES_USER', value: identity.role },
      { name: 'POSTGRES_DB', value: identity.database },
      { name: 'POSTGRES_PASSWORD', ...passwordFrom(BACKING_KEYS.postgres) },
    ];
    const hbaDir = '/etc/strata-postgresql';
    // The stack's role (the superuser of this server) may stream WAL to the replica; everyone authenticates.
    out.push({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: STACK.postgresConfig, namespace, labels: standardLabels('postgresql', STACK.postgres.name), ownerReferences: owners },
      data: { 'pg_hba.conf': ['local all all trust', 'host all all all scram-sha-256', 'host replication all all scram-sha-256', ''].join('\n') },
    });
    const common = {
      component: 'postgresql',
      port: { name: 'postgresql', containerPort: STACK.postgres.port },
      image: thirdPartyImage(settings, 'postgres'),
      args: ['-c', `hba_file=${hbaDir}/pg_hba.conf`, '-c', 'wal_level=replica', '-c', 'max_wal_senders=5', '-c', 'hot_standby=on'],
      volumeMountPath: '/var/lib/postgresql/data',
      extraVolumes: [{ name: 'config', configMap: { name: STACK.postgresConfig } }],
      extraMounts: [{ name: 'config', mountPath: hbaDir, readOnly: true }],
      readiness: { exec: { command: ['pg_isready', '-U', identity.role, '-d', identity.database, '-h', '127.0.0.1'] }, periodSeconds: 5 },
      // pg_isready exits 1 while the server rejects connections (starting, replaying WAL) and 2 when
      // nothing answers: only the latter is a dead server.
      liveness: {
        exec: { command: ['sh', '-c', `pg_isready -h 127.0.0.1 -p ${STACK.postgres.port} -t 5; [ $? -ne 2 ]`] },
        periodSeconds: 10,
        timeoutSeconds: 10,
        failureThreshold: 6,
      },
      storage: settings.dataVolumeSize,
    };
    out.push(...server({ ...common, name: STACK.postgres.name, env: pgEnv }, namespace, owners));
    const primaryHost = serviceHost(settings, STACK.postgres.name, namespace);
    out.push(
      ...server(
        {
          ...common,
          name: STACK.postgresReplica,
          env: pgEnv,
          // A hot standby: cloned from the primary once (pg_basebackup -R writes the standby settings).
          initContainers: [
            {
              name: 'clone-primary',
              image: thirdPartyImage(settings, 'postgres'),
              command: [
                'sh',
                '-c',
                `[ -s "$PGDATA/PG_VERSION" ] || until pg_basebackup -h ${primaryHost} -U ${identity.role} -D "$PGDATA" -R -X stream; do rm -rf ` +
                  `"$PGDATA"; sleep 5; done`,
              ],
              env: [
                { name: 'PGDATA', value: PGDATA },
                { name: 'PGPASSWORD', ...passwordFrom(BACKING_KEYS.postgres) },
              ],
              volumeMounts: [{ name: 'data', mountPath: common.volumeMountPath }],
              resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } },
              securityContext: RESTRICTED_CONTAINER_SECURITY,
            },
          ],
        },
        namespace,
        owners,
      ),
    );
    // One of the two evicted at a time: a drain never stops both the primary and its standby.
    out.push(disruptionBudget(STACK.postgres.name, namespace, componentPods('postgresql'), owners));
  }
  if (bundledRabbitmq(settings) && providers.rabbitmq === 'rabbitmq-operator') out.push(...renderRabbitmqCluster(namespace, owners, identity, credentials));
  else if (bundledRabbitmq(settings)) {
    out.push(
      ...server(
        {
          name: STACK.rabbitmq.name,
          component: 'rabbitmq',
          port: { name: 'amqp', containerPort: STACK.rabbitmq.port },
          image: thirdPartyImage(settings, 'rabbitmq'),
          env: [
            { name: 'RABBITMQ_DEFAULT_USER', value: identity.brokerUser },
            { name: 'RABBITMQ_DEFAULT_PASS', ...passwordFrom(BACKING_KEYS.rabbitmq) },
          ],
          volumeMountPath: '/var/lib/rabbitmq',
          readiness: { exec: { command: ['rabbitmq-diagnostics', '-q', 'check_port_connectivity'] }, periodSeconds: 10, timeoutSeconds: 10 },
          // The node's runtime answers (the RabbitMQ docs' liveness check); boot takes up to a minute.
          liveness: {
            exec: { command: ['rabbitmq-diagnostics', '-q', 'ping'] },
            initialDelaySeconds: 60,
            periodSeconds: 30,
            timeoutSeconds: 15,
            failureThreshold: 3,
          },
          storage: '2Gi',
        },
        namespace,
        owners,
      ),
    );
    // A single broker: the budget lets a drain move it (one at a time) rather than block the drain forever.
    out.push(disruptionBudget(STACK.rabbitmq.name, namespace, componentPods('rabbitmq'), owners));
  }
  return out;
}
