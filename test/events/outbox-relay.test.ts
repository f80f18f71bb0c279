import { expect } from 'chai';
import { v7 as uuidv7 } from 'uuid';
import { AmqpEventBroker } from '../../images/control-plane/src/events/amqp-broker.js';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import { AmqpEventPublisher } from '../../images/data-plane/src/events/amqp-publisher.js';
import { OutboxRelay } from '../../images/data-plane/src/outbox/relay.js';
import { Gauge } from '../../images/service-kit/src/index.js';
import { eventually, outboxSuite, quietLogger, RABBITMQ_URL } from './rabbitmq-fixture.js';

describe('outbox relay coalesces kicks (real PostgreSQL and RabbitMQ)', function () {
  this.timeout(60_000);
  const fx = outboxSuite('strata_relay', 4);

  it('runs one pass for the commits kicked within its delay, publishing each row once and marking all sent', async () => {
    const broker = new AmqpEventBroker({ url: RABBITMQ_URL, exchange: fx.names.exchange, logger: quietLogger }).start();
    fx.closers.push(() => broker.close());
    const received: string[] = [];
    await broker.waitUntilConnected(20_000);
    await broker.subscribe(fx.names.queue('relay'), async (event) => {
      received.push(event.id);
    });
    const publisher = new AmqpEventPublisher({ url: RABBITMQ_URL, exchange: fx.names.exchange, logger: quietLogger }).start();
    fx.closers.push(() => publisher.close());
    await publisher.waitUntilConnected(20_000);

    // The real catalog; only its passes (SELECTs of unsent rows) are counted.
    const real = new Catalog(fx.sql);
    let passes = 0;
    const catalog = Object.assign(Object.create(real) as Catalog, {
      unsentEvents: (limit: number) => {
        passes++;
        return real.unsentEvents(limit);
      },
    });
    const relay = new OutboxRelay(catalog, publisher, new Gauge({ name: 'test_relay_backlog', help: 'test', registers: [] }), quietLogger, () => new Date(), {
      coalesceMs: 20,
    });
    fx.closers.push(() => relay.stop());

    const ids = Array.from({ length: 40 }, () => uuidv7());
    // 40 commits, each followed by its kick, as the data plane does after every PUT.
    await Promise.all(
      ids.map(async (id, n) => {
        await fx.sql.query('INSERT INTO outbox (event_id, type, payload) VALUES ($1, $2, $3)', [
          id,
          'object.created',
          JSON.stringify({ bucket: 'b', key: `k${n}` }),
        ]);
      }),
    );
    for (let i = 0; i < ids.length; i++) relay.kick();
    await eventually(() => received.length >= ids.length, 'every event delivered');
    // The relay marks rows sent once the broker confirms them, which may come after the consumer got them.
    const unsent = async () => Number((await fx.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL')).rows[0]!.n);
    await eventually(async () => (await unsent()) === 0, 'every row marked sent');
    expect(passes).to.equal(1);
    expect([...received].sort()).to.deep.equal([...ids].sort());

    // A later commit's kick runs its own pass.
    const late = uuidv7();
    await fx.sql.query('INSERT INTO outbox (event_id, type, payload) VALUES ($1, $2, $3)', [late, 'object.created', '{}']);
    relay.kick();
    await eventually(() => received.includes(late), 'the late event delivered');
    expect(passes).to.equal(2);
  });
});
