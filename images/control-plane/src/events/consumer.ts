import type { Counter, Logger } from '../../../service-kit/src/index.js';
import type { EventInbox } from '../metadata/store.js';
import type { EventBroker, StrataEvent, Subscription } from './broker.js';

export const CONTROL_PLANE_QUEUE = 'strata.control-plane';

/** Events applied per statement at most (the broker's prefetch bounds it too). */
export const DEFAULT_MAX_BATCH = 64;
/** How long the first event of a batch waits for more (unless the batch fills up first). */
export const DEFAULT_BATCH_MS = 10;

interface ConsumerDeps {
  broker: EventBroker;
  inbox: Pick<EventInbox, 'applyOnce'>;
  logger: Logger;
  consumed: Counter<'type' | 'outcome'>;
  /** Events applied together at most. Default DEFAULT_MAX_BATCH. */
  maxBatch?: number;
  /** How long an event waits for others to share its statement. Default DEFAULT_BATCH_MS. */
  batchMs?: number;
}

/**
 * Applies the side effects of object-store events: per-bucket object and byte counts (in the same
 * statement that records the event id, so a redelivered event changes nothing).
 *
 * Deliveries are applied in batches: an event waits up to `batchMs` (or until `maxBatch` events, or
 * the broker's prefetch, are waiting) and the waiting events go together, one batch at a time, in
 * one statement and one commit, so a busy queue costs one statement per batch instead of one per
 * event. A broker that hands out one delivery at a time (the in-memory one awaits each handler)
 * never gets that wait: its events are applied at once.
 * Each delivery's handler resolves (the broker acks) only after the commit that applied it; when a
 * batch fails, each of its events is applied again as a batch of one, so that one bad event is
 * redelivered alone and the others are acknowledged.
 */
export async function startEventConsumer(deps: ConsumerDeps): Promise<Subscription> {
  const batcher = new EventBatcher(deps, deps.maxBatch ?? DEFAULT_MAX_BATCH, deps.batchMs ?? DEFAULT_BATCH_MS);
  const subscription = await deps.broker.subscribe(CONTROL_PLANE_QUEUE, (event: StrataEvent) => batcher.add(event));
  return {
    close: async () => {
      await subscription.close();
      // Deliveries still waiting for their batch are handed back (not acked: the broker redelivers
      // them), and the batch being written finishes before the caller closes the database.
      await batcher.stop();
    },
  };
}

interface Pending {
  event: StrataEvent;
  at: number;
  resolve(): void;
  reject(err: unknown): void;
}

class EventBatcher {
  private pending: Pending[] = [];
  private busy = false;
  private timer: NodeJS.Timeout | undefined;
  /** The batch being written. */
  private current: Promise<void> | undefined;
  /** Deliveries handed to add() and not yet settled. */
  private unsettled = 0;
  /** Has the broker ever handed out a delivery while another was unsettled (RabbitMQ's prefetch)? */
  private concurrent = false;
  private stopped = false;

  constructor(
    private readonly deps: ConsumerDeps,
    private readonly maxBatch: number,
    private readonly batchMs: number,
  ) {}

  add(event: StrataEvent): Promise<void> {
    if (this.unsettled > 0) this.concurrent = true;
    this.unsettled++;
    return new Promise<void>((resolve, reject) => {
      if (this.stopped) {
        reject(new Error('event consumer closed'));
        return;
      }
      this.pending.push({ event, at: Date.now(), resolve, reject });
      this.schedule();
    }).finally(() => {
      this.unsettled--;
    });
  }

  /** Hand back the deliveries waiting for a batch (the broker redelivers them); wait for the batch being written. */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.stopped = true;
    for (const p of this.pending.splice(0)) p.reject(new Error('event consumer closed'));
    await this.current;
  }

  /** Flush at once when a batch is full, else when the oldest waiting event has waited batchMs. */
  private schedule(): void {
    if (this.busy || this.pending.length === 0) return;
    if (this.pending.length >= this.maxBatch) {
      this.flush();
      return;
    }
    // Only where more deliveries may come meanwhile is waiting worth it.
    const wait = this.concurrent ? Math.max(0, this.pending[0]!.at + this.batchMs - Date.now()) : 0;
    if (!this.timer) this.timer = setTimeout(() => this.flush(), wait);
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.busy || this.pending.length === 0) return;
    this.busy = true;
    const batch = this.pending.splice(0, this.maxBatch);
    this.current = this.apply(batch).finally(() => {
      this.busy = false;
      this.current = undefined;
      this.schedule();
    });
  }

  private async apply(batch: Pending[]): Promise<void> {
    const { inbox, logger } = this.deps;
    let applied: boolean[] | undefined;
    if (batch.length > 1) {
      try {
        applied = await inbox.applyOnce(batch.map((p) => p.event));
      } catch (err) {
        // Each as a batch of one: a bad event must not hold back (or take down) the others.
        logger.warn({ err, events: batch.length }, 'applying a batch of events failed; applying them one by one');
      }
    }
    await Promise.all(
      batch.map(async (p, i) => {
        try {
          this.finish(p.event, applied ? applied[i]! : (await inbox.applyOnce([p.event]))[0]!);
          p.resolve();
        } catch (err) {
          this.deps.consumed.inc({ type: p.event.type, outcome: 'failed' });
          logger.warn({ err, eventId: p.event.id, type: p.event.type }, 'event not applied, will be redelivered');
          p.reject(err);
        }
      }),
    );
  }

  /** After the event's commit: the count. */
  private finish(event: StrataEvent, applied: boolean): void {
    this.deps.consumed.inc({ type: event.type, outcome: applied ? 'applied' : 'duplicate' });
  }
}
