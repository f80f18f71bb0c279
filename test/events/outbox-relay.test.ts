import { expect } from 'chai';
import { v7 as uuidv7 } from 'uuid';
import { AmqpEventBroker } from '../../images/control-plane/src/events/amqp-broker.js';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import { AmqpEventPublisher } from '../../images/data-plane/src/events/amqp-publisher.js';
import type { EventPublisher, StrataEvent } from '../../images/data-plane/src/events/publisher.js';
import { DEFAULT_CLAIM_MS, OutboxRelay } from '../../images/data-plane/src/outbox/relay.js';
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

    // The real catalog; only its passes (claims of unsent rows) are counted.
    const real = new Catalog(fx.sql);
    let passes = 0;
    const catalog = Object.assign(Object.create(real) as Catalog, {
      claimUnsentEvents: (...args: Parameters<Catalog['claimUnsentEvents']>) => {
        passes++;
        return real.claimUnsentEvents(...args);
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

  it('two replicas relay disjoint rows (each event published once), and the rows of one that dies mid-publish go out once its claim ran out', async () => {
    const publisher = new AmqpEventPublisher({ url: RABBITMQ_URL, exchange: fx.names.exchange, logger: quietLogger }).start();
    fx.closers.push(() => publisher.close());
    await publisher.waitUntilConnected(20_000);
    // Each publish the relays start, by event id (then the real publisher's confirm).
    const published = new Map<string, number>();
    const counted: EventPublisher = {
      publish: (event: StrataEvent) => {
        published.set(event.id, (published.get(event.id) ?? 0) + 1);
        return publisher.publish(event);
      },
    };
    let seq = 0;
    const relayOf = (events: EventPublisher, clock: () => Date) =>
      new OutboxRelay(new Catalog(fx.sql), events, new Gauge({ name: `test_replica_backlog_${++seq}`, help: 'test', registers: [] }), quietLogger, clock);
    const insert = async (n: number) => {
      const ids = Array.from({ length: n }, () => uuidv7());
      for (const id of ids) await fx.sql.query('INSERT INTO outbox (event_id, type, payload) VALUES ($1, $2, $3)', [id, 'object.created', '{}']);
      return ids;
    };
    const unsent = async () => Number((await fx.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL')).rows[0]!.n);
    await eventually(async () => (await unsent()) === 0, 'the earlier test drained');
    published.clear();

    const ids = await insert(250);
    const [a, b] = [relayOf(counted, () => new Date()), relayOf(counted, () => new Date())];
    // Both passes at once, as two replicas kicked by their commits.
    await Promise.all([a.runOnce(), b.runOnce()]);
    expect(await unsent()).to.equal(0);
    expect([...published.keys()].sort()).to.deep.equal([...ids].sort());
    expect([...published.values()].filter((n) => n !== 1)).to.deep.equal([]);

    // A replica claims a batch and dies before any confirm (its publish never settles).
    const orphaned = await insert(30);
    published.clear();
    const dying = relayOf({ publish: () => new Promise<void>(() => undefined) }, () => new Date());
    void dying.runOnce();
    const claimed = async () =>
      Number((await fx.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL AND claimed_until IS NOT NULL')).rows[0]!.n);
    await eventually(async () => (await claimed()) === orphaned.length, 'the dying relay claimed its batch');
    const clock = { now: new Date() };
    const survivor = relayOf(counted, () => clock.now);
    expect(await survivor.runOnce(), 'claimed rows are left to their claim').to.equal(0);
    clock.now = new Date(Date.now() + DEFAULT_CLAIM_MS + 1000);
    expect(await survivor.runOnce()).to.equal(orphaned.length);
    expect(await unsent()).to.equal(0);
    expect([...published.keys()].sort()).to.deep.equal([...orphaned].sort());
  });

  it('a relay whose publish fails gives back only its own claims, not rows another relay took once its claim ran out', async () => {
    const catalog = new Catalog(fx.sql);
    const unsent = async () => Number((await fx.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL')).rows[0]!.n);
    await eventually(async () => (await unsent()) === 0, 'the earlier tests drained');
    const id = uuidv7();
    await fx.sql.query('INSERT INTO outbox (event_id, type, payload) VALUES ($1, $2, $3)', [id, 'object.created', '{}']);
    const t0 = Date.now();
    // Relay A claims the row; its claim runs out while it is still publishing, and relay B claims the row.
    const aUntil = new Date(t0 + 1_000);
    const [row] = await catalog.claimUnsentEvents(10, new Date(t0), aUntil);
    const bUntil = new Date(t0 + 60_000);
    expect((await catalog.claimUnsentEvents(10, new Date(t0 + 2_000), bUntil)).map((r) => r.id)).to.deep.equal([row!.id]);
    // A's publish then fails: giving back its claim leaves B's in place.
    await catalog.releaseClaims([row!.id], aUntil);
    const held = await fx.sql.query<{ claimed_until: Date | null }>('SELECT claimed_until FROM outbox WHERE id = $1', [row!.id]);
    expect(held.rows[0]!.claimed_until?.getTime()).to.equal(bUntil.getTime());
    expect(await catalog.claimUnsentEvents(10, new Date(t0 + 3_000), new Date(t0 + 90_000)), 'no third relay takes it').to.deep.equal([]);
    // B's own release gives it back.
    await catalog.releaseClaims([row!.id], bUntil);
    expect((await catalog.claimUnsentEvents(10, new Date(t0 + 3_000), new Date(t0 + 90_000))).map((r) => r.id)).to.deep.equal([row!.id]);
    await catalog.markSent([row!.id], new Date());
  });
});
