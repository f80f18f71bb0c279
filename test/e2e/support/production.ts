import pg from 'pg';
import { RABBITMQ_URL, type RabbitNames } from '../../events/rabbitmq-fixture.js';
import type { PgReplicaHarness } from '../../support/pg-replica.js';
import type { RedisClusterHarness } from '../../support/redis-cluster.js';

/** A new database on the primary, replicated to the standby: answers the URL of that database on a server (primary or replica). */
export async function replicatedDatabase(pgh: PgReplicaHarness, name: string): Promise<(server: string) => string> {
  const admin = new pg.Client({ connectionString: pgh.primaryUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  await pgh.waitForReplay();
  return (server) => Object.assign(new URL(server), { pathname: `/${name}` }).toString();
}

/** The settings that put the platform's services on the production servers: PostgreSQL primary and replica, Redis Cluster, RabbitMQ. */
export function productionServersEnv(
  pgh: PgReplicaHarness,
  dbUrl: (server: string) => string,
  redis: RedisClusterHarness,
  redisKeyPrefix: string,
  names: RabbitNames,
): Record<string, string> {
  return {
    STRATA_PG_URL: dbUrl(pgh.primaryUrl),
    STRATA_PG_REPLICA_URLS: dbUrl(pgh.replicaUrl),
    STRATA_REDIS_NODES: redis.nodes.map((n) => `${n.host}:${n.port}`).join(','),
    STRATA_REDIS_KEY_PREFIX: redisKeyPrefix,
    STRATA_AMQP_URL: RABBITMQ_URL,
    STRATA_AMQP_EXCHANGE: names.exchange,
    STRATA_AMQP_QUEUE_PREFIX: `${names.prefix}.`,
  };
}
