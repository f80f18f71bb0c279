// Strata's events on RabbitMQ: one durable topic exchange, routing key = event type, JSON bodies.
import type { ChannelModel } from 'amqplib';
import { AmqpConnection, type AmqpConnectionState } from './amqp-connection.js';
import type { Logger } from './logger.js';

/** The exchange every Strata event goes to (topic, durable); routing key = event type. */
export const DEFAULT_EVENTS_EXCHANGE = 'strata.events';

/** What every event carries on the wire (services add their own payloads). */
export interface EventEnvelope {
  id: string;
  type: string;
  occurredAt?: string;
}

export interface AmqpEventsOptions {
  /** `amqp://user:pass@host:5672/vhost` (STRATA_AMQP_URL). */
  url: string;
  /** Exchange name; default `strata.events`. Tests use a unique one. */
  exchange?: string;
  /**
   * Publish as `mandatory`: an event that no queue is bound for is rejected (the outbox keeps it until
   * a consumer's queue exists) instead of being dropped by RabbitMQ. Default true.
   */
  mandatory?: boolean;
  /** Confirm wait per event; default 5000 ms. */
  confirmTimeoutMs?: number;
  logger?: Logger;
  onStateChange?: (state: AmqpConnectionState) => void;
  /** Connection name in RabbitMQ's UI. */
  connectionName?: string;
}

/**
 * A reconnecting connection to the events exchange that publishes with confirms: each event is one
 * persistent JSON message (messageId = event id, type = event type) and publish() resolves once
 * RabbitMQ confirmed it, failing at once while disconnected. Every (re)connect declares the exchange;
 * subclasses that consume extend `setup` and `stateChanged`.
 */
export class AmqpEvents<E extends EventEnvelope = EventEnvelope> {
  protected readonly connection: AmqpConnection;
  readonly exchange: string;
  private readonly mandatory: boolean;

  constructor(opts: AmqpEventsOptions, defaultConnectionName: string) {
    this.exchange = opts.exchange ?? DEFAULT_EVENTS_EXCHANGE;
    this.mandatory = opts.mandatory ?? true;
    this.connection = new AmqpConnection({
      url: opts.url,
      name: opts.connectionName ?? defaultConnectionName,
      logger: opts.logger,
      confirmTimeoutMs: opts.confirmTimeoutMs,
      onStateChange: (state) => {
        opts.onStateChange?.(state);
        this.stateChanged(state);
      },
      setup: (connection) => this.setup(connection),
    });
  }

  /** Connect in the background (publish() fails fast until connected). */
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

  publish(event: E): Promise<void> {
    return this.connection.publish(this.exchange, event.type, Buffer.from(JSON.stringify(event)), {
      persistent: true,
      mandatory: this.mandatory,
      messageId: event.id,
      type: event.type,
      contentType: 'application/json',
      timestamp: event.occurredAt ? Math.floor(Date.parse(event.occurredAt) / 1000) || undefined : undefined,
    });
  }

  close(): Promise<void> {
    return this.connection.close();
  }

  /** Run on every new connection before it is reported connected. */
  protected async setup(connection: ChannelModel): Promise<void> {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined); // reported by the connection's own 'error'/'close'
    await channel.assertExchange(this.exchange, 'topic', { durable: true });
    await channel.close();
  }

  protected stateChanged(_state: AmqpConnectionState): void {}
}
