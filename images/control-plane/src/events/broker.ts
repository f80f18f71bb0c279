import type { StrataEvent } from '../metadata/store.js';

export type { StrataEvent };

/** A consumer's registration; close() stops deliveries to it. */
export interface Subscription {
  close(): Promise<void>;
}

/**
 * The event broker, shaped after RabbitMQ so that an amqplib implementation drops in:
 * `publish` resolves only once the broker has taken the message (publisher confirm);
 * a handler's promise is the ack — resolved acks, rejected requeues for redelivery (at-least-once).
 * Every named queue receives every event; consumers of one queue compete for its messages.
 */
export interface EventBroker {
  publish(event: StrataEvent): Promise<void>;
  subscribe(queue: string, handler: (event: StrataEvent) => Promise<void>): Promise<Subscription>;
  close(): Promise<void>;
}
