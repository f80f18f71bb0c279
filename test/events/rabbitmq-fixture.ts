import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { v7 as uuidv7 } from 'uuid';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { createLogger, createPgSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { createTestDatabase } from '../support/pg.js';
import type { StrataEvent } from '../../images/control-plane/src/events/broker.js';

/** The machine's shared RabbitMQ; tests only declare (and delete) names of their own. */
export const RABBITMQ_URL = process.env.STRATA_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

export const quietLogger = createLogger('events-test', 'silent');

/** An AMQP URL for the same broker reached through another port (a fault proxy). */
export function amqpUrlVia(port: number): string {
  const url = new URL(RABBITMQ_URL);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString();
}

/** Unique exchange and queue names for one test, and their removal from the shared broker. */
export class RabbitNames {
  readonly prefix = `strata.test.${randomBytes(5).toString('hex')}`;
  readonly exchange = `${this.prefix}.events`;
  private readonly queues = new Set<string>();

  queue(name: string): string {
    const full = `${this.prefix}.${name}`;
    this.queues.add(full);
    return full;
  }

  /** Messages ready (not delivered, not unacknowledged) in one of this test's queues. */
  async readyCount(queue: string): Promise<number> {
    const connection = await amqp.connect(RABBITMQ_URL);
    try {
      const channel = await connection.createChannel();
      return (await channel.checkQueue(queue)).messageCount;
    } finally {
      await connection.close();
    }
  }

  async cleanup(): Promise<void> {
    const connection = await amqp.connect(RABBITMQ_URL);
    try {
      const channel = await connection.createChannel();
      for (const queue of this.queues) await channel.deleteQueue(queue);
      await channel.deleteExchange(this.exchange);
      await channel.close();
    } finally {
      await connection.close();
    }
  }
}

export function testEvent(type = 'object.created', payload: Record<string, unknown> = {}): StrataEvent {
  return { id: uuidv7(), type, occurredAt: new Date().toISOString(), payload: { bucket: 'b', key: 'k', ...payload } };
}

/** Poll until check() holds; fails with `what` after its timeout. */
export { eventually } from '../support/eventually.js';

/** The state of an outbox suite: a migrated test database, RabbitMQ names of its own, and what its tests start (closed newest first). */
export interface OutboxSuite {
  sql: SqlClient;
  names: RabbitNames;
  closers: Array<() => Promise<void>>;
}

/** Starts an outbox suite's state before the calling suite and removes it after; call inside `describe`. */
export function outboxSuite(dbPrefix: string, maxConnections: number): OutboxSuite {
  return fixtureHooks(
    'suite',
    async () => {
      const db = await createTestDatabase(dbPrefix);
      const sql = createPgSqlClient(db.url, { max: maxConnections });
      try {
        await migrate(sql);
      } catch (err) {
        await sql.close();
        await db.drop();
        throw err;
      }
      return { db, sql, names: new RabbitNames(), closers: [] as Array<() => Promise<void>> };
    },
    async ({ db, sql, names, closers }) => {
      for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
      await names.cleanup().catch(() => undefined);
      await sql.close();
      await db.drop();
    },
  );
}
