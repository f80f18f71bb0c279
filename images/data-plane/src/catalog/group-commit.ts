/**
 * Group commit: work submitted while a batch is running waits and goes as the next batch, so a
 * single-connection database (embedded PGlite, where statements queue anyway) runs one statement
 * for many concurrent writers. A lone submission goes at once: no added latency when idle.
 *
 * `run` settles every item of its batch on its own (an item's failure is that item's alone).
 */
export class GroupCommit<I, O> {
  private waiting: Array<{ item: I; resolve: (value: O) => void; reject: (err: unknown) => void }> = [];
  private running = false;

  constructor(
    private readonly run: (items: I[]) => Promise<PromiseSettledResult<O>[]>,
    private readonly maxBatch = 64,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, this.maxBatch);
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
    } finally {
      this.running = false;
    }
  }
}
