import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startControlPlane } from '../../images/control-plane/src/app.js';
import { AmqpEventBroker } from '../../images/control-plane/src/events/amqp-broker.js';
import { CONTROL_PLANE_QUEUE } from '../../images/control-plane/src/events/consumer.js';
import { startDataPlane } from '../../images/data-plane/src/app.js';
import { AmqpEventPublisher } from '../../images/data-plane/src/events/amqp-publisher.js';
import { createPgSqlClient, type RunningService, type SqlClient } from '../../images/service-kit/src/index.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { startTcpProxy, type TcpFaultProxy } from '../support/tcp-proxy.js';
import { amqpUrlVia, eventually, quietLogger, RabbitNames, RABBITMQ_URL } from './rabbitmq-fixture.js';

const TOKEN = 'events-test-internal-token-0123';

/**
 * The production wiring of the event path: data plane (outbox relay → AmqpEventPublisher) and control
 * plane (AmqpEventBroker → idempotent consumer → bucket stats) on PostgreSQL and RabbitMQ. Uploads
 * keep succeeding while RabbitMQ is unreachable, and the stats catch up once it is back.
 */
describe('object layer over RabbitMQ: data plane outbox → control plane consumer', function () {
  this.timeout(150_000);
  let db: TestDatabase;
  let sql: SqlClient;
  let names: RabbitNames;
  let outage: TcpFaultProxy;
  let dataDir: string;
  let cp: RunningService;
  let dp: RunningService;
  let broker: AmqpEventBroker;
  let publisher: AmqpEventPublisher;

  before(async () => {
    db = await createTestDatabase('strata_events');
    sql = createPgSqlClient(db.url, { max: 6 });
    names = new RabbitNames();
    names.queue(CONTROL_PLANE_QUEUE); // the broker prefixes it with names.prefix; removed at the end
    const target = new URL(RABBITMQ_URL);
    outage = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5672) });
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-events-dp-'));
    const url = amqpUrlVia(outage.port);
    broker = new AmqpEventBroker({ url, exchange: names.exchange, queuePrefix: `${names.prefix}.`, logger: quietLogger, redeliveryMs: 50 }).start();
    publisher = new AmqpEventPublisher({ url, exchange: names.exchange, logger: quietLogger, confirmTimeoutMs: 2000 }).start();
    await broker.waitUntilConnected(20_000);
    cp = await startControlPlane({ port: 0, host: '127.0.0.1', internalToken: TOKEN, secretKey: 'events-test-secret-key', sql, broker, logger: quietLogger });
    dp = await startDataPlane({
      port: 0,
      host: '127.0.0.1',
      internalToken: TOKEN,
      dataDir,
      sql,
      broker: publisher,
      logger: quietLogger,
      outboxRetryMs: 100,
      blobSweepMs: 0,
    });
  });
  after(async () => {
    await dp?.stop(1000);
    await cp?.stop(1000);
    await publisher?.close();
    await broker?.close();
    await outage?.close();
    await names?.cleanup().catch(() => undefined);
    await sql?.close();
    await db?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const call = (base: string, method: string, p: string, body?: BodyInit, headers: Record<string, string> = {}) =>
    fetch(base + p, { method, headers: { 'x-strata-internal-token': TOKEN, ...headers }, body });
  const put = async (key: string, bytes: number, bucket = 'stats') => {
    const res = await call(dp.url, 'PUT', `/internal/objects/${bucket}/${key}`, Buffer.alloc(bytes, key), { 'x-strata-owner': 'alice' });
    expect(res.status).to.equal(200);
  };
  const stats = async (bucket = 'stats') =>
    ((await (await call(cp.url, 'GET', `/internal/buckets/${bucket}`)).json()) as { stats: { objectCount: number; bytes: number } }).stats;

  it('applies object events to bucket stats, and catches up after RabbitMQ was unreachable', async () => {
    const created = await call(cp.url, 'PUT', '/internal/buckets/stats', JSON.stringify({ owner: 'alice' }), { 'content-type': 'application/json' });
    expect(created.status).to.equal(200);
    await put('one', 10);
    await put('two', 20);
    await eventually(async () => (await stats()).objectCount === 2, 'events for the first uploads');
    expect(await stats()).to.deep.equal({ objectCount: 2, bytes: 30 });

    outage.cut();
    await eventually(() => publisher.state !== 'connected', 'the publisher to notice the outage');
    await put('three', 30); // the synchronous path does not need RabbitMQ
    await put('one', 5); // overwrite: replacedSize travels in the event
    const backlog = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL');
    expect(backlog.rows[0]!.n).to.be.greaterThan(0);
    expect(await stats()).to.deep.equal({ objectCount: 2, bytes: 30 });

    outage.restore();
    await eventually(async () => (await stats()).objectCount === 3 && (await stats()).bytes === 55, 'the stats to catch up', 30_000);
    const processed = await sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM processed_events p JOIN outbox o USING (event_id) WHERE o.type = 'object.created' AND o.payload->>'bucket' = 'stats'",
    );
    expect(processed.rows[0]!.n).to.equal(4);
  });

  /**
   * The fault test with real uploads: 500 PUTs through the data plane (8 at a time), RabbitMQ
   * cut for the relay and the consumer from the 150th to the 350th, then back while uploads go on.
   * Every upload succeeds meanwhile (the synchronous path needs no broker); afterwards every event has
   * arrived and been applied once (bucket stats are exact, one processed_events row per outbox row),
   * and redelivered duplicates change nothing.
   */
  it('500 uploads with RabbitMQ cut in the middle: every event arrives, nothing is lost, duplicates change nothing', async () => {
    const bucket = 'outage500';
    const created = await call(cp.url, 'PUT', `/internal/buckets/${bucket}`, JSON.stringify({ owner: 'alice' }), { 'content-type': 'application/json' });
    expect(created.status).to.equal(200);
    const current = new Map<string, number>();
    const uploadAll = async (jobs: Array<[string, number]>) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < jobs.length) {
            const [key, size] = jobs[next++]!;
            await put(key, size, bucket);
            current.set(key, size);
          }
        }),
      );
    };
    const sizeOf = (i: number) => 1 + ((i * 37) % 500);
    const keys = (from: number, to: number): Array<[string, number]> => Array.from({ length: to - from }, (_, j) => [`k${from + j}`, sizeOf(from + j)]);
    const unsent = async () => Number((await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL')).rows[0]!.n);

    await uploadAll(keys(0, 150));
    outage.cut();
    await eventually(() => publisher.state !== 'connected', 'the publisher to notice the outage');
    // 180 new keys and 20 overwrites of keys written before the outage, all while RabbitMQ is away.
    await uploadAll([...keys(150, 330), ...Array.from({ length: 20 }, (_, j): [string, number] => [`k${j * 5}`, 700 + j])]);
    expect(await unsent(), 'events wait in the outbox').to.be.greaterThan(0);
    expect((await stats(bucket)).objectCount).to.be.lessThan(330);
    outage.restore();
    await uploadAll(keys(330, 480)); // uploads go on while the backlog drains

    const expected = () => ({ objectCount: current.size, bytes: [...current.values()].reduce((a, b) => a + b, 0) });
    expect(current.size).to.equal(480);
    await eventually(async () => JSON.stringify(await stats(bucket)) === JSON.stringify(expected()), 'the stats to take in all 500 uploads', 60_000);
    await eventually(async () => (await unsent()) === 0, 'the outbox to drain');
    const eventsOf = `FROM outbox o WHERE o.type = 'object.created' AND o.payload->>'bucket' = '${bucket}'`;
    const counts = async () =>
      (
        await sql.query<{ sent: number; processed: number }>(
          `SELECT count(*)::int AS sent, count(*) FILTER (WHERE EXISTS (SELECT 1 FROM processed_events p WHERE p.event_id = o.event_id))::int AS processed ${eventsOf}`,
        )
      ).rows[0]!;
    expect(await counts()).to.deep.equal({ sent: 500, processed: 500 });

    // Duplicates (a relay that died between the broker's confirm and markSent sends rows again).
    const again = await sql.query<{ event_id: string; type: string; payload: Record<string, unknown>; created_at: Date }>(
      `SELECT o.event_id, o.type, o.payload, o.created_at ${eventsOf} ORDER BY o.id LIMIT 100`,
    );
    for (const row of again.rows) await publisher.publish({ id: row.event_id, type: row.type, occurredAt: row.created_at.toISOString(), payload: row.payload });
    // A fresh upload published after the duplicates: once its effect shows, the duplicates were delivered too.
    await put('sentinel', 1, bucket);
    current.set('sentinel', 1);
    await eventually(async () => JSON.stringify(await stats(bucket)) === JSON.stringify(expected()), 'the sentinel upload to be applied');
    await new Promise((r) => setTimeout(r, 300));
    expect(await stats(bucket)).to.deep.equal(expected());
    expect(await counts()).to.deep.equal({ sent: 501, processed: 501 });
  });
});
