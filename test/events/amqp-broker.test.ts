import { expect } from 'chai';
import { AmqpEventBroker } from '../../images/control-plane/src/events/amqp-broker.js';
import type { StrataEvent } from '../../images/control-plane/src/events/broker.js';
import { AmqpEventPublisher } from '../../images/data-plane/src/events/amqp-publisher.js';
import { amqpConnectionMetrics, AmqpPublishError, AmqpUnavailableError, Registry, type AmqpConnectionState } from '../../images/service-kit/src/index.js';
import { startTcpProxy, type TcpFaultProxy } from '../support/tcp-proxy.js';
import { amqpUrlVia, eventually, quietLogger, RabbitNames, RABBITMQ_URL, testEvent } from './rabbitmq-fixture.js';

/** Restores the network: the publisher and the broker reconnect, and an event published then is delivered. */
async function deliversOnceRestored(
  outage: TcpFaultProxy,
  p: AmqpEventPublisher,
  b: AmqpEventBroker,
  received: string[],
  timeoutMs: number,
  what: string,
): Promise<void> {
  outage.restore();
  await p.waitUntilConnected(timeoutMs);
  await b.waitUntilConnected(timeoutMs);
  const after = testEvent();
  await p.publish(after);
  await eventually(() => received.includes(after.id), what);
}

describe('RabbitMQ event adapters (real broker)', function () {
  this.timeout(60_000);
  let names: RabbitNames;
  const closers: Array<() => Promise<void>> = [];

  beforeEach(() => {
    names = new RabbitNames();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    await names.cleanup();
  });

  async function broker(url = RABBITMQ_URL, extra: { redeliveryMs?: number; states?: AmqpConnectionState[] } = {}): Promise<AmqpEventBroker> {
    const b = new AmqpEventBroker({
      url,
      exchange: names.exchange,
      logger: quietLogger,
      redeliveryMs: extra.redeliveryMs ?? 50,
      onStateChange: (s) => extra.states?.push(s),
    }).start();
    closers.push(() => b.close());
    await b.waitUntilConnected(20_000);
    return b;
  }

  async function publisher(url = RABBITMQ_URL): Promise<AmqpEventPublisher> {
    const p = new AmqpEventPublisher({ url, exchange: names.exchange, logger: quietLogger }).start();
    closers.push(() => p.close());
    await p.waitUntilConnected(20_000);
    return p;
  }

  async function proxy(): Promise<TcpFaultProxy> {
    const target = new URL(RABBITMQ_URL);
    const p = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5672) });
    closers.push(() => p.close());
    return p;
  }

  it('delivers published events with their content, confirmed, to a subscriber', async () => {
    const b = await broker();
    const received: StrataEvent[] = [];
    await b.subscribe(names.queue('cp'), async (e) => {
      received.push(e);
    });
    const p = await publisher();
    const sent = [testEvent('object.created', { size: 5 }), testEvent('object.recycled'), testEvent('bucket.created')];
    for (const e of sent) await p.publish(e);
    await b.publish(testEvent('object.purged'));
    await eventually(() => received.length === 4, '4 deliveries');
    expect(received.slice(0, 3)).to.deep.equal(sent);
    expect(received[3]!.type).to.equal('object.purged');
    expect(p.state).to.equal('connected');
    expect(() => b.assertConnected()).not.to.throw();
  });

  it('rejects an event no queue is bound for, so the outbox keeps it', async () => {
    const p = await publisher();
    const err = await p.publish(testEvent()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(AmqpPublishError);
    expect((err as Error).message).to.match(/no queue is bound/);
  });

  it('redelivers an event whose handler failed until the handler succeeds, then acks it', async () => {
    const b = await broker();
    const queue = names.queue('flaky');
    const attempts = new Map<string, number>();
    let succeeded = 0;
    await b.subscribe(queue, async (e) => {
      const n = (attempts.get(e.id) ?? 0) + 1;
      attempts.set(e.id, n);
      if (n < 3) throw new Error('transient failure');
      succeeded++;
    });
    const event = testEvent();
    await b.publish(event);
    await eventually(() => succeeded === 1, 'the third attempt to succeed');
    expect(attempts.get(event.id)).to.equal(3);
    await b.close();
    expect(await names.readyCount(queue)).to.equal(0);
  });

  it('gives every event to every named queue, and once to competing consumers of one queue', async () => {
    const b = await broker();
    const a: string[] = [];
    const c: string[] = [];
    const shared: string[] = [];
    await b.subscribe(names.queue('a'), async (e) => void a.push(e.id));
    await b.subscribe(names.queue('c'), async (e) => void c.push(e.id));
    const sharedQueue = names.queue('shared');
    await b.subscribe(sharedQueue, async (e) => void shared.push(e.id));
    await b.subscribe(sharedQueue, async (e) => void shared.push(e.id));
    const p = await publisher();
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const e = testEvent();
      ids.push(e.id);
      await p.publish(e);
    }
    await eventually(() => a.length === 20 && c.length === 20 && shared.length === 20, 'all deliveries');
    expect([...a].sort()).to.deep.equal([...ids].sort());
    expect([...c].sort()).to.deep.equal([...ids].sort());
    expect([...shared].sort()).to.deep.equal([...ids].sort());
  });

  it('fails fast while RabbitMQ is unreachable, then reconnects, resubscribes and delivers', async () => {
    const outage = await proxy();
    const states: AmqpConnectionState[] = [];
    const b = await broker(amqpUrlVia(outage.port), { states });
    const received: string[] = [];
    await b.subscribe(names.queue('cp'), async (e) => void received.push(e.id));
    const p = await publisher(amqpUrlVia(outage.port));
    const before = testEvent();
    await p.publish(before);
    await eventually(() => received.includes(before.id), 'delivery before the outage');

    outage.cut();
    await eventually(() => p.state !== 'connected' && b.state !== 'connected', 'both clients to notice the outage');
    const during = await p.publish(testEvent()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(during).to.be.instanceOf(AmqpUnavailableError);
    expect(() => p.assertConnected()).to.throw(AmqpUnavailableError);
    // Reconnect attempts are refused while cut; nothing crashes.
    await new Promise((r) => setTimeout(r, 300));
    expect(p.state).to.not.equal('connected');

    await deliversOnceRestored(outage, p, b, received, 20_000, 'delivery after the outage');
    expect(states).to.include.members(['connected', 'connecting', 'disconnected']);
  });

  it('lets a service start and subscribe while RabbitMQ is unreachable, and consumes once it is back', async () => {
    const outage = await proxy();
    outage.cut();
    const b = new AmqpEventBroker({ url: amqpUrlVia(outage.port), exchange: names.exchange, logger: quietLogger }).start();
    closers.push(() => b.close());
    const received: string[] = [];
    const subscription = await b.subscribe(names.queue('late'), async (e) => void received.push(e.id));
    expect(b.state).to.not.equal('connected');
    const early = await b.publish(testEvent()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(early).to.be.instanceOf(AmqpUnavailableError);

    outage.restore();
    await b.waitUntilConnected(20_000);
    const p = await publisher();
    const event = testEvent();
    await p.publish(event);
    await eventually(() => received.includes(event.id), 'delivery to the subscription made while down');
    await subscription.close();
    const afterClose = testEvent();
    await p.publish(afterClose); // the durable queue keeps it for the next consumer
    await eventually(async () => (await names.readyCount(names.queue('late'))) === 1, 'the event to wait in the queue');
    expect(received).to.not.include(afterClose.id);
  });

  it('times out instead of hanging when the network goes silent, and recovers when it returns', async () => {
    const outage = await proxy();
    // heartbeat=1: a silent peer is declared dead after a couple of seconds.
    const url = `${amqpUrlVia(outage.port)}?heartbeat=1`;
    const b = await broker(url);
    const received: string[] = [];
    await b.subscribe(names.queue('cp'), async (e) => void received.push(e.id));
    const p = new AmqpEventPublisher({ url, exchange: names.exchange, logger: quietLogger, confirmTimeoutMs: 500 }).start();
    closers.push(() => p.close());
    await p.waitUntilConnected(20_000);

    outage.stall();
    const during = await p.publish(testEvent()).then(
      () => undefined,
      (e: unknown) => e,
    );
    // Either the confirm timed out, or the heartbeat already noticed and publishing failed fast.
    expect(during).to.be.instanceOf(Error);
    expect((during as Error).name).to.be.oneOf(['AmqpPublishError', 'AmqpUnavailableError']);
    await eventually(() => p.state !== 'connected', 'the heartbeat to declare the connection dead', 30_000);

    await deliversOnceRestored(outage, p, b, received, 30_000, 'delivery after the network came back');
  });

  it('reports the connection state as metrics', async () => {
    const registry = new Registry();
    const hookFor = amqpConnectionMetrics(registry);
    const outage = await proxy();
    const p = new AmqpEventPublisher({
      url: amqpUrlVia(outage.port),
      exchange: names.exchange,
      logger: quietLogger,
      onStateChange: hookFor('publisher'),
    }).start();
    closers.push(() => p.close());
    await p.waitUntilConnected(20_000);
    const value = async (name: string) => (await registry.getSingleMetric(name)!.get()).values.find((v) => v.labels.connection === 'publisher')?.value;
    expect(await value('strata_amqp_connected')).to.equal(1);
    outage.cut();
    await eventually(() => p.state !== 'connected', 'the outage to be noticed');
    expect(await value('strata_amqp_connected')).to.equal(0);
    expect(await value('strata_amqp_disconnects_total')).to.equal(1);
    outage.restore();
    await p.waitUntilConnected(20_000);
    expect(await value('strata_amqp_connected')).to.equal(1);
  });

  it('rebuilds its topology when the exchange and queue vanish under it (channel error, consumer cancelled)', async () => {
    const b = await broker();
    const queue = names.queue('rebuilt');
    const received: string[] = [];
    await b.subscribe(queue, async (e) => void received.push(e.id));
    const p = await publisher();
    const { default: amqp } = await import('amqplib');
    const admin = await amqp.connect(RABBITMQ_URL);
    closers.push(() => admin.close());
    const channel = await admin.createChannel();
    await channel.deleteQueue(queue);
    await channel.deleteExchange(names.exchange);

    // Publishing to a missing exchange is a channel error: it fails, and the connection is rebuilt.
    const err = await p.publish(testEvent()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(Error);
    await p.waitUntilConnected(20_000);
    const event = testEvent();
    await eventually(async () => {
      await b.waitUntilConnected(20_000);
      return p.publish(event).then(
        () => true,
        () => false,
      );
    }, 'a publish to succeed after the topology was declared again');
    await eventually(() => received.includes(event.id), 'delivery through the re-declared queue');
  });

  it('drops a message that is not a Strata event instead of redelivering it forever', async () => {
    const b = await broker();
    const queue = names.queue('poison');
    const received: string[] = [];
    await b.subscribe(queue, async (e) => void received.push(e.id));
    const { default: amqp } = await import('amqplib');
    const raw = await amqp.connect(RABBITMQ_URL);
    closers.push(() => raw.close());
    const channel = await raw.createConfirmChannel();
    channel.publish(names.exchange, 'object.created', Buffer.from('not json'));
    await channel.waitForConfirms();
    const good = testEvent();
    await b.publish(good);
    await eventually(() => received.includes(good.id), 'the good event');
    await b.close(); // unacknowledged messages would go back to the queue now
    expect(await names.readyCount(queue)).to.equal(0);
    expect(received).to.deep.equal([good.id]);
  });
});
