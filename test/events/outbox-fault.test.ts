import { expect } from 'chai';
import { v7 as uuidv7 } from 'uuid';
import { AmqpEventBroker } from '../../images/control-plane/src/events/amqp-broker.js';
import type { StrataEvent } from '../../images/control-plane/src/events/broker.js';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import { AmqpEventPublisher } from '../../images/data-plane/src/events/amqp-publisher.js';
import { OutboxRelay } from '../../images/data-plane/src/outbox/relay.js';
import { Gauge, type SqlClient } from '../../images/service-kit/src/index.js';
import { startTcpProxy, type TcpFaultProxy } from '../support/tcp-proxy.js';
import { amqpUrlVia, eventually, outboxSuite, quietLogger, RABBITMQ_URL } from './rabbitmq-fixture.js';

const EVENTS = 500;

/**
 * The fault test: the data plane's real outbox relay publishes 500 events written to the
 * real outbox table, RabbitMQ goes away in the middle (for both the relay and the consumer) and
 * comes back; an idempotent consumer (processed_events + a counter, one transaction) must end with
 * every event applied exactly once, whatever was redelivered or published twice.
 */
describe('outbox → RabbitMQ → idempotent consumer across an outage (real PostgreSQL and RabbitMQ)', function () {
  this.timeout(120_000);
  const fx = outboxSuite('strata_events', 6);
  let outage: TcpFaultProxy;

  before(async () => {
    await fx.sql.exec('CREATE TABLE consumer_effects (id int PRIMARY KEY, applied bigint NOT NULL); INSERT INTO consumer_effects VALUES (1, 0)');
    const target = new URL(RABBITMQ_URL);
    outage = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5672) });
  });
  after(async () => {
    await outage?.close();
  });

  /** The side effect and the event id in one transaction: a duplicate changes nothing. */
  async function applyOnce(event: StrataEvent): Promise<boolean> {
    return fx.sql.transaction(async (tx) => {
      const fresh = await tx.query('INSERT INTO processed_events (event_id, type) VALUES ($1, $2) ON CONFLICT DO NOTHING', [event.id, event.type]);
      if (fresh.rowCount === 0) return false;
      await tx.query('UPDATE consumer_effects SET applied = applied + 1 WHERE id = 1');
      return true;
    });
  }

  async function writeToOutbox(tx: { query: SqlClient['query'] }, n: number): Promise<void> {
    await tx.query('INSERT INTO outbox (event_id, type, payload) VALUES ($1, $2, $3)', [
      uuidv7(),
      'object.created',
      JSON.stringify({ bucket: 'b', key: `k${n}`, size: n }),
    ]);
  }

  it('delivers all 500 events exactly once in effect, with RabbitMQ cut in the middle', async () => {
    const url = amqpUrlVia(outage.port);
    const broker = new AmqpEventBroker({ url, exchange: fx.names.exchange, logger: quietLogger, redeliveryMs: 50 }).start();
    fx.closers.push(() => broker.close());
    await broker.waitUntilConnected(20_000);
    let deliveries = 0;
    let duplicates = 0;
    let failed = 0;
    let inFlight = 0;
    await broker.subscribe(fx.names.queue('control-plane'), async (event) => {
      deliveries++;
      inFlight++;
      try {
        if (!(await applyOnce(event))) duplicates++;
      } catch (err) {
        failed++; // not acknowledged: redelivered, and counted again then
        throw err;
      } finally {
        inFlight--;
      }
    });

    const publisher = new AmqpEventPublisher({ url, exchange: fx.names.exchange, logger: quietLogger, confirmTimeoutMs: 2000 }).start();
    fx.closers.push(() => publisher.close());
    await publisher.waitUntilConnected(20_000);
    const backlog = new Gauge({ name: 'test_outbox_backlog', help: 'test', registers: [] });
    const relay = new OutboxRelay(new Catalog(fx.sql), publisher, backlog, quietLogger, () => new Date());
    relay.start(100);
    fx.closers.push(() => relay.stop());

    // Writers commit state + outbox rows in small transactions and kick the relay, as the data plane does.
    let failedPublishesSeen = 0;
    for (let n = 0; n < EVENTS; n += 10) {
      await fx.sql.transaction(async (tx) => {
        for (let i = n; i < n + 10; i++) await writeToOutbox(tx, i);
      });
      relay.kick();
      if (n === 200) {
        await eventually(async () => (await applied()) > 0, 'some events before the outage');
        outage.cut();
      }
      if (n === 350) {
        // Still down: the relay's attempts fail fast and the rows stay unsent.
        await eventually(async () => (await attemptsOnUnsent()) > 0, 'the relay to fail while RabbitMQ is down');
        failedPublishesSeen = await attemptsOnUnsent();
        expect(publisher.state).to.not.equal('connected');
        outage.restore();
      }
      await new Promise((r) => setTimeout(r, 5));
    }

    await eventually(async () => (await applied()) === EVENTS && (await unsent()) === 0, 'all events applied and the outbox drained', 90_000);
    expect(failedPublishesSeen).to.be.greaterThan(0);

    // A relay that crashed between confirm and markSent publishes rows again: nothing changes.
    const again = await fx.sql.query<{ event_id: string; type: string; payload: Record<string, unknown>; created_at: Date }>(
      'SELECT event_id, type, payload, created_at FROM outbox ORDER BY id LIMIT 25',
    );
    const before = deliveries;
    for (const row of again.rows) {
      await publisher.publish({ id: row.event_id, type: row.type, occurredAt: row.created_at.toISOString(), payload: row.payload });
    }
    await eventually(() => deliveries >= before + 25, 'the republished duplicates to be delivered');
    // Handlers still running (a redelivery from the outage may be in flight) would skew the counts below.
    await eventually(() => inFlight === 0, 'the handlers in flight to finish');

    const processed = await fx.sql.query<{ n: number }>('SELECT count(DISTINCT event_id)::int AS n FROM processed_events');
    const outboxIds = await fx.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox o JOIN processed_events p ON p.event_id = o.event_id');
    expect(processed.rows[0]!.n).to.equal(EVENTS);
    expect(outboxIds.rows[0]!.n).to.equal(EVENTS);
    expect(await applied()).to.equal(EVENTS);
    expect(duplicates).to.be.at.least(25);
    expect(deliveries).to.equal(EVENTS + duplicates + failed);
  });

  async function applied(): Promise<number> {
    return Number((await fx.sql.query<{ applied: number }>('SELECT applied FROM consumer_effects WHERE id = 1')).rows[0]!.applied);
  }
  async function unsent(): Promise<number> {
    return Number((await fx.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL')).rows[0]!.n);
  }
  async function attemptsOnUnsent(): Promise<number> {
    return Number((await fx.sql.query<{ n: number }>('SELECT coalesce(sum(attempts), 0)::int AS n FROM outbox WHERE sent_at IS NULL')).rows[0]!.n);
  }
});
