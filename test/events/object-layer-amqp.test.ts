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
  this.timeout(90_000);
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
    dp = await startDataPlane({ port: 0, host: '127.0.0.1', internalToken: TOKEN, dataDir, sql, broker: publisher, logger: quietLogger, outboxRetryMs: 100, blobSweepMs: 0 });
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
  const put = async (key: string, bytes: number) => {
    const res = await call(dp.url, 'PUT', `/internal/objects/stats/${key}`, Buffer.alloc(bytes, key), { 'x-strata-owner': 'alice' });
    expect(res.status).to.equal(200);
  };
  const stats = async () => ((await (await call(cp.url, 'GET', '/internal/buckets/stats')).json()) as { stats: { objectCount: number; bytes: number } }).stats;

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
    const processed = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM processed_events WHERE type = 'object.created'");
    expect(processed.rows[0]!.n).to.equal(4);
  });
});
