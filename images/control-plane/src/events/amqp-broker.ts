import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { AmqpConnection, type AmqpConnectionState, type Logger } from '../../../service-kit/src/index.js';
import type { EventBroker, StrataEvent, Subscription } from './broker.js';

/** The exchange every Strata event goes to (topic, durable); routing key = event type. */
export const DEFAULT_EVENTS_EXCHANGE = 'strata.events';

export interface AmqpEventBrokerOptions {
  /** `amqp://user:pass@host:5672/vhost` (STRATA_AMQP_URL). */
  url: string;
  /** Exchange name; default `strata.events`. Tests use a unique one. */
  exchange?: string;
  /**
   * Prepended to every subscriber's queue name, for Strata installations (or test runs) that share
   * one RabbitMQ vhost: e.g. `prod.` makes `strata.control-plane` → `prod.strata.control-plane`. Default none.
   */
  queuePrefix?: string;
  /** Unacknowledged messages per subscriber, i.e. how many handlers run at once per queue. Default 16. */
  prefetch?: number;
  /** A failed handler's message goes back to the queue after this delay (no hot redelivery loop). Default 200 ms. */
  redeliveryMs?: number;
  /** publish() as `mandatory`: rejected when no queue is bound, instead of dropped. Default true. */
  mandatory?: boolean;
  confirmTimeoutMs?: number;
  logger?: Logger;
  onStateChange?: (state: AmqpConnectionState) => void;
  /** Connection name in RabbitMQ's UI; default `strata-control-plane`. */
  connectionName?: string;
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
 * consumers of one queue compete. A handler's resolved promise acks; a rejection nacks with requeue
 * after `redeliveryMs` (at-least-once — handlers must be idempotent; a message may also come again
 * after a reconnect). Up to `prefetch` handlers run at once per subscription. publish() resolves on
 * the publisher confirm and fails fast while disconnected.
 *
 * The connection reconnects with backoff by itself; each new connection re-declares the exchange and
 * every queue and resumes every consumer. subscribe() while disconnected registers the consumer and
 * resolves at once (the queue is declared on connect), so a service can start while RabbitMQ is down.
 */
export class AmqpEventBroker implements EventBroker {
  private readonly connection: AmqpConnection;
  private readonly consumers = new Set<Consumer>();
  readonly exchange: string;
  private readonly prefetch: number;
  private readonly queuePrefix: string;
  private readonly redeliveryMs: number;
  private readonly mandatory: boolean;
  private readonly logger: Logger | undefined;
  private closed = false;

  constructor(opts: AmqpEventBrokerOptions) {
    this.exchange = opts.exchange ?? DEFAULT_EVENTS_EXCHANGE;
    this.prefetch = opts.prefetch ?? 16;
    this.queuePrefix = opts.queuePrefix ?? '';
    this.redeliveryMs = opts.redeliveryMs ?? 200;
    this.mandatory = opts.mandatory ?? true;
    this.logger = opts.logger;
    this.connection = new AmqpConnection({
      url: opts.url,
      name: opts.connectionName ?? 'strata-control-plane',
      logger: opts.logger,
      confirmTimeoutMs: opts.confirmTimeoutMs,
      onStateChange: (state) => {
        opts.onStateChange?.(state);
        // Consumers added while a connection was being set up missed that setup: start them now.
        if (state === 'connected') this.startMissingConsumers();
      },
      setup: (connection) => this.setup(connection),
    });
  }

  /** Connect in the background; subscriptions made before or after are served once connected. */
  start(): this {
    this.connection.start();
    return this;
  }

  get state(): AmqpConnectionState {
    return this.connection.state;
  }

  waitUntilConnected(timeoutMs?: number): Promise<void> {
    return this.connection.waitUntilConnected(timeoutMs);
  }

  /** For /readyz or a status endpoint: throws unless connected. */
  assertConnected(): void {
    this.connection.assertConnected();
  }

  publish(event: StrataEvent): Promise<void> {
    return this.connection.publish(this.exchange, event.type, Buffer.from(JSON.stringify(event)), {
      persistent: true,
      mandatory: this.mandatory,
      messageId: event.id,
      type: event.type,
      contentType: 'application/json',
    });
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

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.consumers].map((c) => this.stopConsumer(c)));
    await this.connection.close();
  }

  private async setup(connection: ChannelModel): Promise<void> {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined); // reported by the connection's own 'error'/'close'
    await channel.assertExchange(this.exchange, 'topic', { durable: true });
    await channel.close();
    for (const consumer of this.consumers) await this.startConsumer(connection, consumer);
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
    consumer.handler(event).then(
      () => settle(() => channel.ack(message)),
      () => {
        setTimeout(() => settle(() => channel.nack(message, false, true)), this.redeliveryMs).unref();
      },
    );
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
