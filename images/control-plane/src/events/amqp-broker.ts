import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { AmqpEvents, type AmqpConnectionState, type AmqpEventsOptions, type Logger } from '../../../service-kit/src/index.js';
import type { EventBroker, StrataEvent, Subscription } from './broker.js';

export interface AmqpEventBrokerOptions extends AmqpEventsOptions {
  /**
   * Prepended to every subscriber's queue name, for Strata installations (or test runs) that share
   * one RabbitMQ vhost: e.g. `prod.` makes `strata.control-plane` → `prod.strata.control-plane`. Default none.
   */
  queuePrefix?: string;
  /**
   * Unacknowledged messages per subscriber, i.e. how many handlers run at once per queue (the control
   * plane's consumer applies them in batches). Default 64.
   */
  prefetch?: number;
  /** A failed handler's message goes back to the queue after this delay (no hot redelivery loop). Default 200 ms. */
  redeliveryMs?: number;
}

/**
 * A channel's deliveries not yet acked or nacked, in delivery-tag order, and the handled ones whose
 * ack waits for the next flush: acks of one tick go as one `multiple` ack where they cover every
 * unsettled delivery up to a tag (fewer frames for amqplib and RabbitMQ), the rest one by one.
 */
interface AckState {
  unsettled: Set<number>;
  handled: Map<number, ConsumeMessage>;
  flushing: boolean;
}

interface Consumer {
  queue: string;
  handler: (event: StrataEvent) => Promise<void>;
  /** The connection this consumer's channel lives on (undefined: not consuming yet). */
  startedOn?: ChannelModel;
  channel?: Channel;
  consumerTag?: string;
  closed: boolean;
}

/**
 * EventBroker on RabbitMQ, with the in-memory broker's contract: every subscriber name is a durable
 * queue bound to the durable topic exchange with `#`, so each named queue receives every event and
 * consumers of one queue compete. A handler's resolved promise acks (the acks of one tick together,
 * as one `multiple` ack where they cover every delivery up to a tag); a rejection nacks with requeue
 * after `redeliveryMs` (at-least-once — handlers must be idempotent; a message may also come again
 * after a reconnect). Up to `prefetch` handlers run at once per subscription. publish() resolves on
 * the publisher confirm and fails fast while disconnected.
 *
 * The connection reconnects with backoff by itself; each new connection re-declares the exchange and
 * every queue and resumes every consumer. subscribe() while disconnected registers the consumer and
 * resolves at once (the queue is declared on connect), so a service can start while RabbitMQ is down.
 */
export class AmqpEventBroker extends AmqpEvents<StrataEvent> implements EventBroker {
  private readonly consumers = new Set<Consumer>();
  private readonly acks = new WeakMap<Channel, AckState>();
  private readonly prefetch: number;
  private readonly queuePrefix: string;
  private readonly redeliveryMs: number;
  private readonly logger: Logger | undefined;
  private closed = false;

  constructor(opts: AmqpEventBrokerOptions) {
    super(opts, 'strata-control-plane');
    this.prefetch = opts.prefetch ?? 64;
    this.queuePrefix = opts.queuePrefix ?? '';
    this.redeliveryMs = opts.redeliveryMs ?? 200;
    this.logger = opts.logger;
  }

  async subscribe(queue: string, handler: (event: StrataEvent) => Promise<void>): Promise<Subscription> {
    if (this.closed) throw new Error('event broker closed');
    const consumer: Consumer = { queue: this.queuePrefix + queue, handler, closed: false };
    this.consumers.add(consumer);
    const connection = this.connection.connection;
    if (connection && this.connection.state === 'connected') {
      // Declared before subscribe() resolves, so events published afterwards reach this queue.
      await this.startConsumer(connection, consumer).catch((err: unknown) => this.dropConnection(err, queue));
    }
    return { close: () => this.stopConsumer(consumer) };
  }

  override async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.consumers].map((c) => this.stopConsumer(c)));
    await super.close();
  }

  protected override async setup(connection: ChannelModel): Promise<void> {
    await super.setup(connection);
    for (const consumer of this.consumers) await this.startConsumer(connection, consumer);
  }

  protected override stateChanged(state: AmqpConnectionState): void {
    // Consumers added while a connection was being set up missed that setup: start them now.
    if (state === 'connected') this.startMissingConsumers();
  }

  private startMissingConsumers(): void {
    const connection = this.connection.connection;
    if (!connection) return;
    for (const consumer of this.consumers) {
      if (consumer.startedOn !== connection) {
        this.startConsumer(connection, consumer).catch((err: unknown) => this.dropConnection(err, consumer.queue));
      }
    }
  }

  /** One channel per consumer, so prefetch and a channel error stay per queue. */
  private async startConsumer(connection: ChannelModel, consumer: Consumer): Promise<void> {
    if (consumer.closed || consumer.startedOn === connection) return;
    consumer.startedOn = connection;
    const channel = await connection.createChannel();
    channel.on('error', (err: Error) => this.logger?.warn({ err, queue: consumer.queue }, 'RabbitMQ consumer channel error'));
    channel.on('close', () => {
      // A consumer channel that dies under a live connection would leave its queue unserved: rebuild.
      if (!consumer.closed && consumer.channel === channel && this.connection.connection === connection) {
        this.connection.reconnect(`consumer channel of ${consumer.queue} closed`);
      }
    });
    await channel.prefetch(this.prefetch);
    await channel.assertQueue(consumer.queue, { durable: true });
    await channel.bindQueue(consumer.queue, this.exchange, '#');
    consumer.channel = channel;
    const { consumerTag } = await channel.consume(consumer.queue, (message) => this.deliver(channel, consumer, message), { noAck: false });
    consumer.consumerTag = consumerTag;
    if (consumer.closed) await this.cancel(channel, consumerTag);
  }

  private deliver(channel: Channel, consumer: Consumer, message: ConsumeMessage | null): void {
    if (message === null) {
      // RabbitMQ cancelled the consumer (queue deleted): declare it again on a new connection.
      if (!consumer.closed) this.connection.reconnect(`consumer of ${consumer.queue} cancelled by RabbitMQ`);
      return;
    }
    const event = parseEvent(message.content);
    if (!event) {
      this.logger?.error({ queue: consumer.queue, messageId: message.properties.messageId }, 'dropping a message that is not a Strata event');
      settle(() => channel.nack(message, false, false));
      return;
    }
    const tag = message.fields.deliveryTag;
    let acks = this.acks.get(channel);
    if (!acks) this.acks.set(channel, (acks = { unsettled: new Set(), handled: new Map(), flushing: false }));
    const state = acks;
    state.unsettled.add(tag);
    consumer.handler(event).then(
      () => this.ackSoon(channel, state, message),
      () => {
        setTimeout(() => {
          state.unsettled.delete(tag);
          settle(() => channel.nack(message, false, true));
        }, this.redeliveryMs).unref();
      },
    );
  }

  /** Ack at the end of this tick, together with the other handlers that finished in it. */
  private ackSoon(channel: Channel, state: AckState, message: ConsumeMessage): void {
    state.handled.set(message.fields.deliveryTag, message);
    if (state.flushing) return;
    state.flushing = true;
    setImmediate(() => {
      state.flushing = false;
      // The longest run of handled deliveries from the oldest unsettled one: one ack with `multiple`
      // (it acks every delivery up to its tag, so only when none of them is still in a handler).
      let last: ConsumeMessage | undefined;
      for (const tag of state.unsettled) {
        const handled = state.handled.get(tag);
        if (!handled) break;
        last = handled;
        state.unsettled.delete(tag);
        state.handled.delete(tag);
      }
      if (last) {
        const upTo = last;
        settle(() => channel.ack(upTo, true));
      }
      for (const [tag, handled] of state.handled) {
        state.unsettled.delete(tag);
        settle(() => channel.ack(handled));
      }
      state.handled.clear();
    });
  }

  private async stopConsumer(consumer: Consumer): Promise<void> {
    if (consumer.closed) return;
    consumer.closed = true;
    this.consumers.delete(consumer);
    const channel = consumer.channel;
    if (!channel) return;
    if (consumer.consumerTag) await this.cancel(channel, consumer.consumerTag);
    // Closing the channel hands its unacknowledged messages back to the queue.
    await channel.close().catch(() => undefined);
  }

  private async cancel(channel: Channel, consumerTag: string): Promise<void> {
    await channel.cancel(consumerTag).catch(() => undefined);
  }

  private dropConnection(err: unknown, queue: string): void {
    this.logger?.warn({ err, queue }, 'starting a RabbitMQ consumer failed');
    this.connection.reconnect(`consumer of ${queue} could not start`);
  }
}

/** ack/nack on a channel that has closed meanwhile throws; RabbitMQ redelivers such messages anyway. */
function settle(action: () => void): void {
  try {
    action();
  } catch {
    // the channel is gone; the message is requeued by RabbitMQ
  }
}

function parseEvent(content: Buffer): StrataEvent | undefined {
  try {
    const value = JSON.parse(content.toString('utf8')) as Partial<StrataEvent>;
    if (typeof value.id !== 'string' || typeof value.type !== 'string' || typeof value.occurredAt !== 'string') return undefined;
    if (typeof value.payload !== 'object' || value.payload === null) return undefined;
    return value as StrataEvent;
  } catch {
    return undefined;
  }
}
