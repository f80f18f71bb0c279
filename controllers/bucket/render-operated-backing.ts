import type { OwnerReference } from '../api/index.js';
import type { Manifest } from '../support/kube-client.js';
import { standardLabels } from '../support/ownership.js';
import type { OperatorSettings } from '../support/settings.js';
import type { StackIdentity } from './stack-identity.js';
import type { BackingCredentials } from './stack-secrets.js';
import { STACK } from './stack-names.js';

/** CloudNativePG's Cluster and the RabbitMQ cluster operator's RabbitmqCluster. */
export const CNPG_CLUSTER = { apiVersion: 'postgresql.cnpg.io/v1', kind: 'Cluster' } as const;
export const RABBITMQ_CLUSTER = { apiVersion: 'rabbitmq.com/v1beta1', kind: 'RabbitmqCluster' } as const;

/**
 * Who runs a namespace's bundled PostgreSQL and RabbitMQ: the stack's own StatefulSets, or the
 * database and broker operators of the cluster when their APIs exist (chosen once per namespace:
 * a stack that already runs its own StatefulSet keeps it, with its data).
 */
export interface BackingProviders {
  postgres: 'statefulset' | 'cloudnative-pg';
  rabbitmq: 'statefulset' | 'rabbitmq-operator';
}

export const STATEFULSET_PROVIDERS: BackingProviders = { postgres: 'statefulset', rabbitmq: 'statefulset' };

/** The Services CloudNativePG puts in front of a Cluster: read-write (the primary) and read-only (replicas). */
export const cnpgPrimaryService = `${STACK.postgres.name}-rw`;
export const cnpgReplicaService = `${STACK.postgres.name}-ro`;
/** The login of the stack's role (CloudNativePG) or broker user (RabbitMQ operator): username and password. */
const postgresLogin = `${STACK.postgres.name}-login`;
const rabbitmqLogin = `${STACK.rabbitmq.name}-login`;

function login(name: string, namespace: string, component: string, owners: OwnerReference[], username: string, password: string): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace, labels: standardLabels(component, name), ownerReferences: owners },
    type: 'kubernetes.io/basic-auth',
    stringData: { username, password },
  };
}

/**
 * A CloudNativePG Cluster of two instances (a primary and a streaming replica) with the stack's
 * database owned by the stack's role, whose password is the one the stack's services are given.
 */
export function renderCnpgCluster(
  namespace: string,
  owners: OwnerReference[],
  settings: OperatorSettings,
  identity: StackIdentity,
  credentials: BackingCredentials,
): Manifest[] {
  return [
    login(postgresLogin, namespace, 'postgresql', owners, identity.role, credentials.postgresPassword),
    {
      ...CNPG_CLUSTER,
      metadata: { name: STACK.postgres.name, namespace, labels: standardLabels('postgresql', STACK.postgres.name), ownerReferences: owners },
      spec: {
        instances: 2,
        storage: { size: settings.dataVolumeSize },
        bootstrap: { initdb: { database: identity.database, owner: identity.role, secret: { name: postgresLogin } } },
      },
    },
  ];
}

/** A one-node RabbitmqCluster whose default user is the stack's broker user (from a Secret, never the spec). */
export function renderRabbitmqCluster(namespace: string, owners: OwnerReference[], identity: StackIdentity, credentials: BackingCredentials): Manifest[] {
  return [
    login(rabbitmqLogin, namespace, 'rabbitmq', owners, identity.brokerUser, credentials.rabbitmqPassword),
    {
      ...RABBITMQ_CLUSTER,
      metadata: { name: STACK.rabbitmq.name, namespace, labels: standardLabels('rabbitmq', STACK.rabbitmq.name), ownerReferences: owners },
      spec: { replicas: 1, persistence: { storage: '2Gi' }, secretBackend: { externalSecret: { name: rabbitmqLogin } } },
    },
  ];
}
