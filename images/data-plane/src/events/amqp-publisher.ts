import { AmqpEvents, type AmqpEventsOptions } from '../../../service-kit/src/index.js';
import type { EventPublisher, StrataEvent } from './publisher.js';

export type AmqpEventPublisherOptions = AmqpEventsOptions;

/**
 * The outbox relay's publisher on RabbitMQ (the kit's AmqpEvents): publish() resolves only once
 * RabbitMQ confirmed the event; while RabbitMQ is unreachable it fails at once, so the relay keeps
 * the row and retries. The connection reconnects by itself and re-declares the exchange.
 */
export class AmqpEventPublisher extends AmqpEvents<StrataEvent> implements EventPublisher {
  constructor(opts: AmqpEventPublisherOptions) {
    super(opts, 'strata-data-plane');
  }
}
