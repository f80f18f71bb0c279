/** Overall limit on retries, on top of the per-key backoff (client-go's default: 10/s, burst 100). */
export interface RetryRateLimit {
  qps: number;
  burst: number;
  /** Clock in milliseconds (tests pass their own). */
  now?: () => number;
}

/**
 * A rate-limited work queue in the manner of client-go's: a key is queued at most once, a key being
 * processed that is added again is processed once more afterwards (never concurrently), and failures
 * back off exponentially per key until `forget`, and all retries together through a token bucket (so
 * that many failing keys cannot hammer the API server).
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; at: number }>();
  private waiters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;

  private tokens: number;
  private refilledAt: number;
  private readonly now: () => number;

  constructor(
    private readonly baseDelayMs = 5,
    private readonly maxDelayMs = 60_000,
    private readonly retryLimit: RetryRateLimit = { qps: 10, burst: 100 },
  ) {
    this.now = retryLimit.now ?? Date.now;
    this.tokens = retryLimit.burst;
    this.refilledAt = this.now();
  }

  get depth(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.processing.add(key);
      waiter(key);
      return;
    }
    this.queued.add(key);
    this.queue.push(key);
  }

  /**
   * Add after a delay. Of several pending delayed adds of one key the earliest wins: a retry after a
   * failure is not held back by a long periodic requeue (nor the other way round).
   */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.timers.set(key, { timer, at });
  }

  /** Add with this key's exponential backoff (base × 2^failures, capped), or later when the overall bucket is empty. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.max(Math.min(this.baseDelayMs * 2 ** n, this.maxDelayMs), this.reserveRetry());
    this.addAfter(key, delay);
    return delay;
  }

  /** Take a token from the retry bucket; the wait until it is there (0 while the burst lasts). */
  private reserveRetry(): number {
    const { qps, burst } = this.retryLimit;
    const now = this.now();
    this.tokens = Math.min(burst, this.tokens + ((now - this.refilledAt) * qps) / 1000);
    this.refilledAt = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / qps);
  }

  /** The key succeeded: its backoff starts over. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Next key to process; resolves undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.queued.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Processing of `key` finished; if it was added meanwhile it is queued again. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.delete(key)) this.add(key);
  }

  shutdown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const waiter of this.waiters) waiter(undefined);
    this.waiters = [];
  }
}
