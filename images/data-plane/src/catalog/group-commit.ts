/**
 * Group commit: a single-connection database (embedded PGlite, where statements queue anyway) runs
 * one statement for many concurrent writers. A batch starts at the end of the event-loop turn in which
 * its first item came (setImmediate: no timer, no added latency worth the name), so the items that
 * the same turn's I/O callbacks submit join it — PGlite runs a statement synchronously, so without
 * that turn nothing could ever join. Items submitted while a batch runs go as the next batch.
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
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
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
