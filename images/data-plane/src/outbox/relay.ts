import type { Gauge, Logger } from '../../../service-kit/src/index.js';
import type { Catalog } from '../catalog/catalog.js';
import type { EventPublisher } from '../events/publisher.js';

const BATCH = 100;

/**
 * Publishes outbox rows (written in the same transactions as the state they describe) to the broker
 * and marks them sent once the broker confirmed. Kicked after each commit, and re-run every
 * `retryMs` for whatever is still unsent (broker down, a crash after commit, rows written by the
 * control plane). Delivery is at-least-once: two relays may both send a row; consumers are idempotent.
 */
export class OutboxRelay {
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly catalog: Catalog,
    private readonly publisher: EventPublisher,
    private readonly backlog: Gauge,
    private readonly logger: Logger,
    private readonly clock: () => Date,
  ) {}

  start(retryMs: number): void {
    this.timer = setInterval(() => this.kick(), retryMs);
    this.timer.unref();
    this.kick();
  }

  /** Run a pass soon; passes never overlap (a kick during a pass runs one more after it). */
  kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runOnce()
      .then(() => undefined)
      .catch((err) => this.logger.warn({ err }, 'outbox relay pass failed; will retry'))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Publish everything unsent, oldest first; stops at the first publish failure (order is kept). */
  async runOnce(): Promise<number> {
    let sent = 0;
    let drained = false;
    try {
      for (;;) {
        const rows = await this.catalog.unsentEvents(BATCH);
        const done: number[] = [];
        let failed = false;
        for (const row of rows) {
          try {
            await this.publisher.publish(row.event);
            done.push(row.id);
          } catch (err) {
            failed = true;
            await this.catalog.markAttempt(row.id);
            this.logger.warn({ err, eventId: row.event.id }, 'publishing an event failed; will retry');
            break;
          }
        }
        await this.catalog.markSent(done, this.clock());
        sent += done.length;
        if (failed || rows.length < BATCH) {
          drained = !failed;
          break;
        }
      }
    } finally {
      // A pass that emptied the outbox knows the backlog without counting it again (one query less per
      // commit on the write path); rows committed meanwhile kick another pass.
      this.backlog.set(drained ? 0 : await this.catalog.outboxBacklog().catch(() => 0));
    }
    return sent;
  }

  /** Stop the schedule and wait for a pass in progress. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.again = false;
    await this.running;
  }
}
