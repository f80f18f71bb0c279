/** An event as it travels through the outbox and the broker. */
export interface StrataEvent {
  id: string;
  type: string;
  occurredAt: string;
  payload: Record<string, unknown>;
}

/**
 * The broker as the outbox relay needs it: publish resolves only once the broker has taken the
 * message (RabbitMQ publisher confirm), so a row is marked sent only after that.
 */
export interface EventPublisher {
  publish(event: StrataEvent): Promise<void>;
}
