/**
 * Group commit: a single-connection database (embedded PGlite, where statements queue anyway) runs
 * one statement for many concurrent writers. A batch starts at the end of the event-loop turn in which
 * its first item came (setImmediate: no timer, no added latency worth the name), so the items that
 * the same turn's I/O callbacks submit join it — PGlite runs a statement synchronously, so without
 * that turn nothing could ever join. Items submitted while `maxInFlight` batches run go as the next
 * batch, started as soon as one of those settles.
 *
 * `maxInFlight` > 1 lets a batch be handed over while the one before it still waits for its answer: on
 * the durable PGlite thread an answer waits for the WAL sync after the statement (pglite-fsync.ts), and
 * the thread runs the next statement meanwhile only if it already has it. Each batch is still its own
 * statement and transaction, and the database runs them in the order they were handed over.
 *
 * `run` settles every item of its batch on its own (an item's failure is that item's alone).
 */
export class GroupCommit<I, O> {
  private waiting: Array<{ item: I; resolve: (value: O) => void; reject: (err: unknown) => void }> = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;

  constructor(
    private readonly run: (items: I[]) => Promise<PromiseSettledResult<O>[]>,
    opts: { maxBatch?: number; maxInFlight?: number } = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 64;
    this.maxInFlight = opts.maxInFlight ?? 1;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.scheduled && this.inFlight < this.maxInFlight) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.startBatches();
        });
      }
    });
  }

  /** Hands over waiting items, a batch at a time, while fewer than `maxInFlight` batches run. */
  private startBatches(): void {
    while (this.waiting.length > 0 && this.inFlight < this.maxInFlight) {
      this.inFlight++;
      void this.runBatch(this.waiting.splice(0, this.maxBatch)).finally(() => {
        this.inFlight--;
        // What came while it ran goes at once (the turn that gathered it has passed).
        this.startBatches();
      });
    }
  }

  private async runBatch(batch: typeof this.waiting): Promise<void> {
    let results: PromiseSettledResult<O>[];
    try {
      results = await this.run(batch.map((w) => w.item));
    } catch (err) {
      results = batch.map(() => ({ status: 'rejected', reason: err }));
    }
    batch.forEach((w, i) => {
      const r = results[i];
      if (r?.status === 'fulfilled') w.resolve(r.value);
      else w.reject(r ? r.reason : new Error('group commit returned no result for an item'));
    });
  }
}
