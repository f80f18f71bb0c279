import type { EventBroker, StrataEvent, Subscription } from './broker.js';

type Handler = (event: StrataEvent) => Promise<void>;

interface Queue {
  messages: Array<{ event: StrataEvent; attempts: number }>;
  consumers: Handler[];
  next: number;
  /** Deliveries handed to a consumer and not yet settled. */
  unsettled: number;
  /** A delivery pass is scheduled. */
  draining: boolean;
}

/**
 * In-process broker with the same contract as the RabbitMQ one: durable named queues (messages
 * wait for a consumer), publish resolves when the message is queued, a rejected handler gets the
 * message again after `redeliveryMs`, and up to `prefetch` deliveries per queue are in flight at
 * once, handed out in order (RabbitMQ's consumer prefetch; the control plane's consumer batches what
 * arrives together). Events published before any queue exists are kept for the first queue
 * declared, as a durable queue bound ahead of time would have kept them.
 */
export class InMemoryBroker implements EventBroker {
  private readonly queues = new Map<string, Queue>();
  private readonly unrouted: StrataEvent[] = [];
  private closed = false;
  /** Messages rejected `maxAttempts` times, set aside (a dead-letter queue) instead of looping forever. */
  readonly deadLetters: Array<{ queue: string; event: StrataEvent }> = [];

  constructor(
    private readonly redeliveryMs = 200,
    private readonly maxAttempts = 20,
    /** As the RabbitMQ broker's default. */
    private readonly prefetch = 64,
  ) {}

  async publish(event: StrataEvent): Promise<void> {
    if (this.closed) throw new Error('broker closed');
    if (this.queues.size === 0) {
      this.unrouted.push(event);
      return;
    }
    for (const queue of this.queues.values()) {
      queue.messages.push({ event, attempts: 0 });
      this.drain(queue);
    }
  }

  async subscribe(name: string, handler: Handler): Promise<Subscription> {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = { messages: this.unrouted.splice(0).map((event) => ({ event, attempts: 0 })), consumers: [], next: 0, unsettled: 0, draining: false };
      this.queues.set(name, queue);
    }
    queue.consumers.push(handler);
    this.drain(queue);
    const q = queue;
    return {
      close: async () => {
        q.consumers = q.consumers.filter((h) => h !== handler);
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const q of this.queues.values()) q.consumers = [];
  }

  /** Hand out waiting messages in order while fewer than `prefetch` are unsettled; a failure is retried later. */
  private drain(queue: Queue): void {
    if (queue.draining || this.closed) return;
    queue.draining = true;
    setImmediate(() => {
      queue.draining = false;
      while (queue.messages.length > 0 && queue.consumers.length > 0 && queue.unsettled < this.prefetch && !this.closed) {
        const message = queue.messages.shift()!;
        const handler = queue.consumers[queue.next++ % queue.consumers.length]!;
        queue.unsettled++;
        new Promise<void>((resolve) => resolve(handler(message.event)))
          .catch(() => this.rejected(queue, message))
          .finally(() => {
            queue.unsettled--;
            this.drain(queue);
          });
      }
    });
  }

  private rejected(queue: Queue, message: Queue['messages'][number]): void {
    message.attempts++;
    if (message.attempts >= this.maxAttempts) {
      const name = [...this.queues].find(([, q]) => q === queue)?.[0] ?? '';
      this.deadLetters.push({ queue: name, event: message.event });
      return;
    }
    setTimeout(() => {
      queue.messages.push(message);
      this.drain(queue);
    }, this.redeliveryMs).unref();
  }
}
