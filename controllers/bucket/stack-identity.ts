import { createHash } from 'node:crypto';

/**
 * The names one namespace's stack owns on a shared PostgreSQL and RabbitMQ: its own database and
 * role, its own exchange and queues. Derived from the namespace alone, so two namespaces never share
 * one, and the same namespace always gets the same ones back.
 */
export interface StackIdentity {
  /** PostgreSQL database, owned by `role`; nothing else may connect to it. */
  database: string;
  /** PostgreSQL login role of the stack's services. */
  role: string;
  /** RabbitMQ user of the stack's services on the bundled broker. */
  brokerUser: string;
  /** On a shared (external) RabbitMQ: the stack's own user, with permissions on its own vhost only. */
  sharedBrokerUser: string;
  sharedBrokerVhost: string;
  /** Topic exchange of the stack's events (STRATA_AMQP_EXCHANGE). */
  exchange: string;
  /** Prefix of every queue the stack declares (STRATA_AMQP_QUEUE_PREFIX). */
  queuePrefix: string;
}

/** PostgreSQL truncates identifiers at 63 bytes: longer ones keep a digest of the whole so that they stay distinct. */
const PG_IDENTIFIER_MAX = 63;

function pgIdentifier(namespace: string): string {
  const plain = `strata_${namespace.replace(/[^a-z0-9]/g, '_')}`;
  if (plain.length <= PG_IDENTIFIER_MAX) return plain;
  const digest = createHash('sha256').update(namespace).digest('hex').slice(0, 8);
  return `${plain.slice(0, PG_IDENTIFIER_MAX - digest.length - 1)}_${digest}`;
}

export function stackIdentity(namespace: string): StackIdentity {
  const pg = pgIdentifier(namespace);
  return {
    database: pg,
    role: pg,
    brokerUser: 'strata',
    sharedBrokerUser: `strata-${namespace}`,
    sharedBrokerVhost: `strata-${namespace}`,
    exchange: `strata.${namespace}.events`,
    queuePrefix: `${namespace}.`,
  };
}
