import type { Gauge, Logger } from '../../../service-kit/src/index.js';
import type { Catalog } from '../catalog/catalog.js';
import type { EventPublisher } from '../events/publisher.js';

const BATCH = 100;
/**
 * How long a kick waits before its pass, so that the commits of those milliseconds share it. Each pass
 * costs three statements (read the unsent rows, mark them sent, the consumer's apply): under small PUTs
 * on embedded PGlite, passes every 5 ms took ~18 % of the database thread's statement time
 * (hack/bench/measurements.md, putsmall); events are asynchronous, and 25 ms more is far below the retry.
 */
export const DEFAULT_COALESCE_MS = 25;

/**
 * How long a relay's claim on a batch lasts: far longer than a pass publishes one (the broker's confirms
 * time out after 5 s), and how late the events of a replica that died mid-publish go out.
 */
export const DEFAULT_CLAIM_MS = 30_000;

/**
 * Publishes outbox rows (written in the same transactions as the state they describe) to the broker
 * and marks them sent once the broker confirmed. Kicked after each commit, and re-run every
 * `retryMs` for whatever is still unsent (broker down, a crash after commit, rows written by the
 * control plane). Every data-plane replica runs one: a pass claims its batch (Catalog.claimUnsentEvents),
 * so replicas publish disjoint rows. Delivery is at-least-once: the rows of a relay that died (or
 * stalled past its claim) mid-publish are published again once the claim runs out, and a row whose
 * confirm came but whose mark did not is sent again; consumers are idempotent.
 *
 * Kicks are coalesced: a pass starts `coalesceMs` after the first kick that finds none queued, so under
 * load one SELECT / publish / UPDATE covers the commits of those milliseconds instead of a pass (and
 * its statements and commit) per PUT.
 */
export class OutboxRelay {
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private queued: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly coalesceMs: number;
  private readonly claimMs: number;

  constructor(
    private readonly catalog: Catalog,
    private readonly publisher: EventPublisher,
    private readonly backlog: Gauge,
    private readonly logger: Logger,
    private readonly clock: () => Date,
    opts: { coalesceMs?: number; claimMs?: number } = {},
  ) {
    this.coalesceMs = opts.coalesceMs ?? DEFAULT_COALESCE_MS;
    this.claimMs = opts.claimMs ?? DEFAULT_CLAIM_MS;
  }

  start(retryMs: number): void {
    this.stopped = false;
    this.timer = setInterval(() => this.kick(), retryMs);
    this.timer.unref();
    this.kick();
  }

  /**
   * Run a pass soon (after `coalesceMs`; kicks meanwhile join it); passes never overlap (a kick
   * during a pass queues one more after it).
   */
  kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.queued || this.stopped) return;
    this.queued = setTimeout(() => {
      this.queued = undefined;
      this.pass();
    }, this.coalesceMs);
  }

  private pass(): void {
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
        const now = this.clock();
        const claimUntil = new Date(now.getTime() + this.claimMs);
        const rows = await this.catalog.claimUnsentEvents(BATCH, now, claimUntil);
        // The whole batch is published at once and the confirms awaited together (one confirm round
        // trip per message in turn capped the relay below the write rate). Only the rows before the
        // first failure are marked sent: order is kept, and later rows the broker did take are sent
        // again by the next pass (consumers are idempotent).
        const results = await Promise.allSettled(rows.map((row) => this.publisher.publish(row.event)));
        const firstFailure = results.findIndex((r) => r.status === 'rejected');
        const failed = firstFailure >= 0;
        const done = rows.slice(0, failed ? firstFailure : rows.length).map((row) => row.id);
        if (failed) {
          const row = rows[firstFailure]!;
          await this.catalog.releaseClaims(
            rows.slice(firstFailure).map((r) => r.id),
            claimUntil,
          );
          await this.catalog.markAttempt(row.id);
          this.logger.warn({ err: (results[firstFailure] as PromiseRejectedResult).reason, eventId: row.event.id }, 'publishing an event failed; will retry');
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
    this.stopped = true;
    clearTimeout(this.queued);
    this.queued = undefined;
    this.again = false;
    await this.running;
  }
}
