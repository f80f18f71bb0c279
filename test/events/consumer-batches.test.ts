import { expect } from 'chai';
import { v7 as uuidv7 } from 'uuid';
import { AmqpEventBroker } from '../../images/control-plane/src/events/amqp-broker.js';
import type { StrataEvent } from '../../images/control-plane/src/events/broker.js';
import { CONTROL_PLANE_QUEUE, startEventConsumer } from '../../images/control-plane/src/events/consumer.js';
import { SqlEventInbox } from '../../images/control-plane/src/metadata/event-inbox.js';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { Counter, createPgliteSqlClient, createPgSqlClient, Registry, type SqlClient } from '../../images/service-kit/src/index.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { eventually, quietLogger, RabbitNames, RABBITMQ_URL } from './rabbitmq-fixture.js';

const event = (type: string, payload: Record<string, unknown>, id = uuidv7()): StrataEvent => ({ id, type, occurredAt: new Date().toISOString(), payload });

async function newBucket(sql: SqlClient, name: string): Promise<number> {
  const res = await sql.query<{ id: number }>('INSERT INTO buckets (name, owner, backend) VALUES ($1, \'alice\', \'{"kind":"fs"}\') RETURNING id', [name]);
  return Number(res.rows[0]!.id);
}

async function stats(sql: SqlClient, bucketId: number): Promise<{ objects: number; bytes: number } | undefined> {
  const res = await sql.query<{ object_count: number; bytes: number }>('SELECT object_count, bytes FROM bucket_stats WHERE bucket_id = $1', [bucketId]);
  const row = res.rows[0];
  return row && { objects: Number(row.object_count), bytes: Number(row.bytes) };
}

async function processed(sql: SqlClient, ids: string[]): Promise<number> {
  const res = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM processed_events WHERE event_id = ANY($1::text[])', [ids]);
  return Number(res.rows[0]!.n);
}

/** Waits until every one of `events` is recorded as processed. */
async function untilProcessed(sql: SqlClient, events: Array<{ id: string }>, what: string): Promise<void> {
  const ids = events.map((e) => e.id);
  await eventually(async () => (await processed(sql, ids)) === ids.length, what);
}

for (const kind of ['pglite', 'postgres'] as const) {
  describe(`applying a batch of events at once (${kind})`, function () {
    this.timeout(60_000);
    let db: TestDatabase | undefined;
    let sql: SqlClient;
    let inbox: SqlEventInbox;

    before(async () => {
      if (kind === 'postgres') {
        db = await createTestDatabase('strata_batches');
        sql = createPgSqlClient(db.url, { max: 4 });
      } else {
        sql = await createPgliteSqlClient();
      }
      await migrate(sql);
      inbox = new SqlEventInbox(sql);
    });
    after(async () => {
      await sql?.close();
      await db?.drop();
    });

    it('applies each event once: a duplicate in the batch and an id processed before change nothing', async () => {
      const a = await newBucket(sql, `batch-a-${kind}`);
      const b = await newBucket(sql, `batch-b-${kind}`);
      const earlier = event('object.created', { bucket: 'batch-a', bucketId: a, key: 'old', size: 100, replacedSize: null });
      expect(await inbox.applyOnce([earlier])).to.deep.equal([true]);
      const created = event('object.created', { bucket: 'batch-a', bucketId: a, key: 'x', size: 10, replacedSize: null });
      const batch = [
        created,
        event('object.created', { bucket: 'batch-a', bucketId: a, key: 'x', size: 15, replacedSize: 10 }),
        event('object.created', { bucket: 'batch-b', bucketId: b, key: 'y', size: 7, replacedSize: null }),
        created, // delivered twice in one batch
        earlier, // applied before
        event('object.recycled', { bucket: 'batch-b', bucketId: b, key: 'y', size: 7 }),
        event('object.restored', { bucket: 'batch-b', bucketId: b, key: 'y', size: 7 }),
        event('bucket.created', { bucket: 'batch-c' }),
        event('object.created', { bucket: 'gone', bucketId: 987_654, key: 'z', size: 1, replacedSize: null }), // no such bucket
      ];
      expect(await inbox.applyOnce(batch)).to.deep.equal([true, true, true, false, false, true, true, true, true]);
      expect(await stats(sql, a)).to.deep.equal({ objects: 2, bytes: 115 });
      expect(await stats(sql, b)).to.deep.equal({ objects: 1, bytes: 7 });
      expect(await stats(sql, 987_654)).to.equal(undefined);
      // The whole batch again (a redelivery after a crash between commit and ack): nothing changes.
      expect(await inbox.applyOnce(batch)).to.deep.equal(batch.map(() => false));
      expect(await stats(sql, a)).to.deep.equal({ objects: 2, bytes: 115 });
      expect(await stats(sql, b)).to.deep.equal({ objects: 1, bytes: 7 });
    });

    it('applies bucket.deleted in a batch (its stats row goes) and counts it once', async () => {
      const c = await newBucket(sql, `batch-d-${kind}`);
      await inbox.applyOnce([
        event('object.created', { bucket: 'batch-d', bucketId: c, key: 'p', size: 3, replacedSize: null }),
        event('object.created', { bucket: 'batch-d', bucketId: c, key: 'q', size: 4, replacedSize: null }),
      ]);
      expect(await stats(sql, c)).to.deep.equal({ objects: 2, bytes: 7 });
      const deleted = event('bucket.deleted', { bucket: 'batch-d', bucketId: c });
      const other = event('object.recycled', { bucket: 'batch-d', bucketId: c, key: 'q', size: 4 });
      await sql.query('DELETE FROM buckets WHERE id = $1', [c]);
      expect(await inbox.applyOnce([other, deleted, deleted])).to.deep.equal([true, true, false]);
      expect(await stats(sql, c)).to.equal(undefined);
      expect(await processed(sql, [other.id, deleted.id])).to.equal(2);
    });

    it('fails as a whole on a bad event, leaving the good ones to be applied again', async () => {
      const d = await newBucket(sql, `batch-e-${kind}`);
      const good = event('object.created', { bucket: 'batch-e', bucketId: d, key: 'g', size: 5, replacedSize: null });
      const bad = event('object.created', { bucket: 'batch-e', bucketId: 1e30, key: 'b', size: 5, replacedSize: null }); // not a bigint
      let failure: unknown;
      await inbox.applyOnce([good, bad]).catch((err: unknown) => (failure = err));
      expect(failure).to.be.instanceOf(Error);
      expect(await processed(sql, [good.id, bad.id])).to.equal(0);
      expect(await stats(sql, d)).to.equal(undefined);
      expect(await inbox.applyOnce([good])).to.deep.equal([true]);
      expect(await stats(sql, d)).to.deep.equal({ objects: 1, bytes: 5 });
    });
  });
}

describe('the control plane consumer over RabbitMQ applies deliveries in batches (real PostgreSQL and RabbitMQ)', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let sql: SqlClient;
  let names: RabbitNames;
  let broker: AmqpEventBroker;
  let publisher: AmqpEventBroker;
  const batches: number[] = [];
  let consumed: Counter<'type' | 'outcome'>;
  let close: (() => Promise<void>) | undefined;

  before(async () => {
    db = await createTestDatabase('strata_batches');
    sql = createPgSqlClient(db.url, { max: 6 });
    await migrate(sql);
    names = new RabbitNames();
    names.queue(CONTROL_PLANE_QUEUE);
    const url = RABBITMQ_URL;
    broker = new AmqpEventBroker({ url, exchange: names.exchange, queuePrefix: `${names.prefix}.`, logger: quietLogger, redeliveryMs: 50 }).start();
    publisher = new AmqpEventBroker({ url, exchange: names.exchange, queuePrefix: `${names.prefix}.`, logger: quietLogger }).start();
    await broker.waitUntilConnected(20_000);
    await publisher.waitUntilConnected(20_000);
    // The real store; only the batch sizes it is given are recorded.
    const real = new SqlEventInbox(sql);
    const inbox = {
      applyOnce: (events: StrataEvent[]) => {
        batches.push(events.length);
        return real.applyOnce(events);
      },
    };
    consumed = new Counter({ name: 'test_events_consumed_total', help: 'test', labelNames: ['type', 'outcome'] as const, registers: [new Registry()] });
    const subscription = await startEventConsumer({ broker, inbox, logger: quietLogger, consumed, batchMs: 20 });
    close = () => subscription.close();
  });
  after(async () => {
    await close?.();
    await broker?.close();
    await publisher?.close();
    await names?.cleanup().catch(() => undefined);
    await sql?.close();
    await db?.drop();
  });

  const outcome = async (name: string) => (await consumed.get()).values.filter((v) => v.labels.outcome === name).reduce((a, v) => a + v.value, 0);

  it('applies a burst of events in few statements, duplicates once, and acks them all', async () => {
    const bucketId = await newBucket(sql, 'burst');
    const events = Array.from({ length: 200 }, (_, i) => event('object.created', { bucket: 'burst', bucketId, key: `k${i}`, size: i, replacedSize: null }));
    batches.length = 0;
    await Promise.all([...events, ...events.slice(0, 50)].map((e) => publisher.publish(e)));
    await untilProcessed(sql, events, 'every event applied');
    await eventually(async () => (await outcome('applied')) + (await outcome('duplicate')) === 250, 'every delivery handled');
    expect(await stats(sql, bucketId)).to.deep.equal({ objects: 200, bytes: (199 * 200) / 2 });
    expect(await outcome('applied')).to.equal(200);
    expect(await outcome('duplicate')).to.equal(50);
    expect(batches.length).to.be.greaterThan(0);
    expect(Math.max(...batches)).to.be.greaterThan(1);
    // Everything acknowledged: nothing waits in the queue or comes again.
    await new Promise((r) => setTimeout(r, 300));
    expect(await names.readyCount(`${names.prefix}.${CONTROL_PLANE_QUEUE}`)).to.equal(0);
    expect(await outcome('applied')).to.equal(200);
  });

  it('closing hands back the deliveries still waiting for their batch; the next consumer applies them once', async () => {
    const bucketId = await newBucket(sql, 'handover');
    const held = new Counter({ name: 'test_events_held_total', help: 'test', labelNames: ['type', 'outcome'] as const, registers: [new Registry()] });
    // A second consumer on the same queue whose first write waits for the gate: everything else it is
    // handed meanwhile waits for its turn, and must come back when it closes. (Its batches take one
    // event each, so what it holds never depends on how its deliveries were spread over time.)
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    let writes = 0;
    const real = new SqlEventInbox(sql);
    const gated = {
      applyOnce: async (events: StrataEvent[]) => {
        writes++;
        await gate;
        return real.applyOnce(events);
      },
    };
    const slow = await startEventConsumer({
      broker,
      inbox: gated,
      logger: quietLogger,
      consumed: held,
      batchMs: 60_000,
      maxBatch: 1,
    });
    let slowOpen = true;
    const closeSlow = async () => {
      openGate();
      if (slowOpen) await slow.close();
      slowOpen = false;
    };
    try {
      const appliedBefore = await outcome('applied');
      const events = Array.from({ length: 30 }, (_, i) => event('object.created', { bucket: 'handover', bucketId, key: `k${i}`, size: 2, replacedSize: null }));
      await Promise.all(events.map((e) => publisher.publish(e)));
      // RabbitMQ shares the deliveries between the two consumers; the slow one holds its share.
      await eventually(async () => writes === 1 && (await outcome('applied')) > appliedBefore, 'both consumers handed deliveries');
      await new Promise((r) => setTimeout(r, 200));
      // All but the slow consumer's one gated write are applied by the other consumer or waiting in the slow one.
      const heldBack = 30 - ((await outcome('applied')) - appliedBefore) - 1;
      expect(heldBack).to.be.greaterThan(0);
      await closeSlow();
      await untilProcessed(sql, events, 'every event applied by the other consumer');
      expect(await stats(sql, bucketId)).to.deep.equal({ objects: 30, bytes: 60 });
      const slowApplied = async () => (await held.get()).values.filter((v) => v.labels.outcome === 'applied').reduce((a, v) => a + v.value, 0);
      // Whichever consumer applied an event, it counts once (the other sees a duplicate).
      await eventually(async () => (await outcome('applied')) - appliedBefore + (await slowApplied()) === 30, 'every event counted once');
    } finally {
      await closeSlow();
    }
  });

  it('a bad event in a batch does not hold back the others; it alone is redelivered', async () => {
    const bucketId = await newBucket(sql, 'mixed');
    const good = Array.from({ length: 20 }, (_, i) => event('object.created', { bucket: 'mixed', bucketId, key: `k${i}`, size: 1, replacedSize: null }));
    const bad = event('object.created', { bucket: 'mixed', bucketId: 1e30, key: 'bad', size: 1, replacedSize: null });
    const failedBefore = await outcome('failed');
    batches.length = 0;
    await Promise.all([...good.slice(0, 10), bad, ...good.slice(10)].map((e) => publisher.publish(e)));
    await untilProcessed(sql, good, 'the good events applied');
    // The bad one is redelivered (and fails again) while the good ones stay applied once.
    await eventually(async () => (await outcome('failed')) - failedBefore >= 3, 'the bad event redelivered');
    expect(await processed(sql, [bad.id])).to.equal(0);
    expect(await stats(sql, bucketId)).to.deep.equal({ objects: 20, bytes: 20 });
    expect(Math.max(...batches)).to.be.greaterThan(1);
  });
});

describe('AmqpEventBroker acks the handlers of one tick together (real RabbitMQ)', function () {
  this.timeout(60_000);
  let names: RabbitNames;
  let broker: AmqpEventBroker;

  before(async () => {
    names = new RabbitNames();
    broker = new AmqpEventBroker({ url: RABBITMQ_URL, exchange: names.exchange, logger: quietLogger, redeliveryMs: 50 }).start();
    await broker.waitUntilConnected(20_000);
  });
  after(async () => {
    await broker?.close();
    await names?.cleanup().catch(() => undefined);
  });

  it('never acks a delivery still in its handler or one that failed; each is redelivered until handled', async () => {
    const queue = names.queue('acks');
    const events = Array.from({ length: 40 }, (_, i) => event('object.created', { i }));
    const index = new Map(events.map((e, i) => [e.id, i]));
    const attempts = new Map<string, number>();
    const succeeded = new Map<string, number>();
    const subscription = await broker.subscribe(queue, async (e) => {
      const i = index.get(e.id)!;
      const n = (attempts.get(e.id) ?? 0) + 1;
      attempts.set(e.id, n);
      // A slow handler that then fails, while later deliveries succeed (their acks must not cover it).
      if (i === 7 && n === 1) {
        await new Promise((r) => setTimeout(r, 400));
        throw new Error('slow and failing');
      }
      if (i % 5 === 0 && n === 1) throw new Error('failing once');
      succeeded.set(e.id, (succeeded.get(e.id) ?? 0) + 1);
    });
    await Promise.all(events.map((e) => broker.publish(e)));
    await eventually(() => succeeded.size === events.length, 'every event handled');
    expect([...succeeded.values()].every((n) => n === 1)).to.equal(true);
    expect(attempts.get(events[7]!.id)).to.equal(2);
    expect(attempts.get(events[5]!.id)).to.equal(2);
    // Everything acknowledged: after the consumer is gone nothing goes back to the queue.
    await new Promise((r) => setTimeout(r, 100));
    await subscription.close();
    await eventually(async () => (await names.readyCount(queue)) === 0, 'an empty queue', 2000);
    expect([...succeeded.values()].every((n) => n === 1)).to.equal(true);
  });
});
