import { AmqpConnection, type AmqpConnectionState, type Logger } from '../../../service-kit/src/index.js';
import type { EventPublisher, StrataEvent } from './publisher.js';

/** The exchange every Strata event goes to (topic, durable); routing key = event type. */
export const DEFAULT_EVENTS_EXCHANGE = 'strata.events';

export interface AmqpEventPublisherOptions {
  /** `amqp://user:pass@host:5672/vhost` (STRATA_AMQP_URL). */
  url: string;
  /** Exchange name; default `strata.events`. Tests use a unique one. */
  exchange?: string;
  /**
   * Publish as `mandatory`: an event that no queue is bound for is rejected, so the outbox keeps it
   * until a consumer's queue exists, instead of RabbitMQ dropping it. Default true.
   */
  mandatory?: boolean;
  /** Confirm wait per event; default 5000 ms. */
  confirmTimeoutMs?: number;
  logger?: Logger;
  onStateChange?: (state: AmqpConnectionState) => void;
  /** Connection name in RabbitMQ's UI; default `strata-data-plane`. */
  connectionName?: string;
}

/**
 * The outbox relay's publisher on RabbitMQ: each event becomes one persistent JSON message on a
 * durable topic exchange (messageId = event id, type = event type), and publish() resolves only once
 * RabbitMQ confirmed it. While RabbitMQ is unreachable publish() fails at once (the relay keeps the
 * row and retries); the connection reconnects by itself and re-declares the exchange.
 */
export class AmqpEventPublisher implements EventPublisher {
  private readonly connection: AmqpConnection;
  readonly exchange: string;
  private readonly mandatory: boolean;

  constructor(opts: AmqpEventPublisherOptions) {
    const exchange = opts.exchange ?? DEFAULT_EVENTS_EXCHANGE;
    this.exchange = exchange;
    this.mandatory = opts.mandatory ?? true;
    this.connection = new AmqpConnection({
      url: opts.url,
      name: opts.connectionName ?? 'strata-data-plane',
      logger: opts.logger,
      confirmTimeoutMs: opts.confirmTimeoutMs,
      onStateChange: opts.onStateChange,
      setup: async (connection) => {
        const channel = await connection.createChannel();
        channel.on('error', () => undefined); // reported by the connection's own 'error'/'close'
        await channel.assertExchange(exchange, 'topic', { durable: true });
        await channel.close();
      },
    });
  }

  /** Connect in the background; publish() fails fast until connected. */
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
      timestamp: Math.floor(Date.parse(event.occurredAt) / 1000) || undefined,
    });
  }

  close(): Promise<void> {
    return this.connection.close();
  }
}
