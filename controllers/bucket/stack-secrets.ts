import { randomBytes } from 'node:crypto';
import type { Manifest } from '../support/kube-client.js';
import { standardLabels } from '../support/ownership.js';
import { STACK } from './stack-names.js';

/** Root credentials and internal keys, as the services read them from their environment. */
export interface StackCredentials {
  STRATA_ROOT_USER: string;
  STRATA_ROOT_PASSWORD: string;
  STRATA_INTERNAL_TOKEN: string;
}

const random = (bytes: number) => randomBytes(bytes).toString('base64url');

/**
 * The stack's Secrets with freshly generated values. They are created once and never overwritten
 * (changing them would lock the services out of their own data), and deliberately carry no owner
 * reference: deleting the last Bucket must not destroy the keys of retained data.
 */
export function renderStackSecrets(namespace: string): Manifest[] {
  const labels = standardLabels('storage-stack', 'strata');
  return [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: STACK.rootSecret, namespace, labels },
      type: 'Opaque',
      stringData: { STRATA_ROOT_USER: 'strata-root', STRATA_ROOT_PASSWORD: random(24) },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: STACK.internalSecret, namespace, labels },
      type: 'Opaque',
      stringData: { STRATA_INTERNAL_TOKEN: random(32), STRATA_SECRET_KEY: random(32), STRATA_JWT_SECRET: random(48) },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: STACK.backingSecret, namespace, labels },
      type: 'Opaque',
      // URL-safe: they go into connection URLs as they are.
      stringData: { [BACKING_KEYS.postgres]: random(24), [BACKING_KEYS.rabbitmq]: random(24) },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: STACK.redisSecret, namespace, labels },
      type: 'Opaque',
      // A Secret of its own (not a key added to strata-internal): stacks made before Redis had a
      // password get it created on upgrade, since existing Secrets are never rewritten.
      stringData: { [REDIS_PASSWORD_KEY]: random(32) },
    },
  ];
}

/** The label a Secret carries to be usable as a Bucket's backend credentials (spec.backend.*SecretRef). */
export const BACKEND_CREDENTIALS_LABEL = 'strata.dev/backend-credentials';

/** Key of the Redis Cluster's password in its Secret: the variable name the services read it under. */
export const REDIS_PASSWORD_KEY = 'STRATA_REDIS_PASSWORD';

/** Keys of the stack's own PostgreSQL and RabbitMQ passwords in its backing Secret. */
export const BACKING_KEYS = { postgres: 'POSTGRES_PASSWORD', rabbitmq: 'RABBITMQ_PASSWORD' } as const;

/** The passwords of the namespace's own database role and broker user. */
export interface BackingCredentials {
  postgresPassword: string;
  rabbitmqPassword: string;
}

/** The backing credentials a (created or existing) backing Secret holds. */
export function backingCredentials(secret: { data?: Record<string, string>; stringData?: Record<string, string> }): BackingCredentials {
  const postgresPassword = secretValue(secret, BACKING_KEYS.postgres);
  const rabbitmqPassword = secretValue(secret, BACKING_KEYS.rabbitmq);
  if (!postgresPassword || !rabbitmqPassword) throw new Error(`Secret ${STACK.backingSecret} lacks ${BACKING_KEYS.postgres} or ${BACKING_KEYS.rabbitmq}`);
  return { postgresPassword, rabbitmqPassword };
}

/** Read a Secret's value by key (data is base64, stringData only exists on writes). */
export function secretValue(secret: { data?: Record<string, string>; stringData?: Record<string, string> } | undefined, key: string): string | undefined {
  if (!secret) return undefined;
  if (secret.stringData?.[key] !== undefined) return secret.stringData[key];
  const encoded = secret.data?.[key];
  return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
}
