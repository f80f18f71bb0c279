// Object events from Strata's object store, so that an image put into (or deleted from) the source
// bucket reaches the index at once rather than at the next poll. Two transports, one shape:
//   - RabbitMQ (IMAGE_SEARCH_EVENTS_AMQP_URL): a durable queue of this service bound to the object
//     store's topic exchange (`strata.events`) with the routing keys in OBJECT_EVENT_TYPES;
//   - in process: anything with the object store's broker `subscribe(queue, handler)` contract (the
//     standalone platform's in-memory broker), passed to startImageSearch as `objectEvents`.
// A handler's promise is the ack. Events only trigger a sync of the bucket source (coalesced), so a
// lost or repeated event costs nothing: the periodic sync is the safety net.
import type { ConsumeMessage } from 'amqplib';
import { AmqpConnection, DEFAULT_EVENTS_EXCHANGE, type Logger } from '../../service-kit/src/index.js';

/** The object store's event envelope (what the outbox relay publishes). */
export interface ObjectStoreEvent {
  id: string;
  type: string;
  payload: Record<string, unknown>;
}

export interface ObjectEventSource {
  subscribe(queue: string, handler: (event: ObjectStoreEvent) => Promise<void>): Promise<{ close(): Promise<void> }>;
}

export const OBJECT_CREATED = 'object.created';
/** The events that change what a bucket prefix lists (a purge follows a recycle: nothing to add). */
export const OBJECT_EVENT_TYPES: readonly string[] = [OBJECT_CREATED, 'object.recycled', 'object.restored'];

/** A RabbitMQ subscriber to the object store's events (reconnecting; one consumer channel). */
export class AmqpObjectEvents implements ObjectEventSource {
  private readonly connection: AmqpConnection;
  private consumer: { queue: string; handler: (event: ObjectStoreEvent) => Promise<void> } | null = null;

  constructor(
    url: string,
    private readonly opts: { exchange?: string; logger?: Logger } = {},
  ) {
    this.connection = new AmqpConnection({
      url,
      name: 'image-search-events',
      logger: opts.logger,
      setup: async (connection) => {
        const consumer = this.consumer;
        if (!consumer) return;
        const exchange = this.opts.exchange ?? DEFAULT_EVENTS_EXCHANGE;
        const channel = await connection.createChannel();
        await channel.prefetch(16);
        await channel.assertExchange(exchange, 'topic', { durable: true });
        await channel.assertQueue(consumer.queue, { durable: true });
        for (const type of OBJECT_EVENT_TYPES) await channel.bindQueue(consumer.queue, exchange, type);
        await channel.consume(consumer.queue, (message: ConsumeMessage | null) => {
          if (!message) return;
          let event: ObjectStoreEvent | undefined;
          try {
            const parsed = JSON.parse(message.content.toString('utf8')) as ObjectStoreEvent;
            if (parsed && typeof parsed.type === 'string' && parsed.payload && typeof parsed.payload === 'object') event = parsed;
          } catch {
            // not JSON
          }
          if (!event) {
            this.opts.logger?.warn({ messageId: message.properties.messageId }, 'dropping a message that is not an object store event');
            try {
              channel.nack(message, false, false);
            } catch {
              /* channel closed */
            }
            return;
          }
          // A channel closed meanwhile has already handed the message back to the queue.
          const settle = (fn: () => void) => {
            try {
              fn();
            } catch {
              /* channel closed */
            }
          };
          consumer.handler(event).then(
            () => settle(() => channel.ack(message)),
            () => setTimeout(() => settle(() => channel.nack(message, false, true)), 500).unref(),
          );
        });
      },
    });
  }

  async subscribe(queue: string, handler: (event: ObjectStoreEvent) => Promise<void>): Promise<{ close(): Promise<void> }> {
    if (this.consumer) throw new Error('AmqpObjectEvents takes one subscriber');
    this.consumer = { queue, handler };
    this.connection.start();
    return { close: () => this.close() };
  }

  /** Resolves once connected (queue declared and bound). */
  waitUntilConnected(timeoutMs?: number): Promise<void> {
    return this.connection.waitUntilConnected(timeoutMs);
  }

  async close(): Promise<void> {
    await this.connection.close();
  }
}
