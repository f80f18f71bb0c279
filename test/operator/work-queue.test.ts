import { expect } from 'chai';
import { WorkQueue } from '../../operator/work-queue.js';

describe('operator work queue', () => {
  it('de-duplicates keys waiting in the queue', async () => {
    const q = new WorkQueue();
    q.add('a/x');
    q.add('a/y');
    q.add('a/x');
    expect(q.depth).to.equal(2);
    expect(await q.get()).to.equal('a/x');
    expect(await q.get()).to.equal('a/y');
    q.shutdown();
  });

  it('never hands out a key twice at once; a key added while processing comes back after done', async () => {
    const q = new WorkQueue();
    q.add('k');
    const key = await q.get();
    q.add('k');
    expect(q.depth).to.equal(0);
    let second: string | undefined;
    const waiting = q.get().then((k) => (second = k));
    await new Promise((r) => setTimeout(r, 10));
    expect(second).to.equal(undefined);
    q.done(key!);
    await waiting;
    expect(second).to.equal('k');
    q.shutdown();
  });

  it('backs off exponentially per key, capped, until forgotten', () => {
    const q = new WorkQueue(10, 50);
    expect([q.addRateLimited('k'), q.addRateLimited('k'), q.addRateLimited('k'), q.addRateLimited('k')]).to.deep.equal([10, 20, 40, 50]);
    expect(q.addRateLimited('other')).to.equal(10);
    expect(q.retries('k')).to.equal(4);
    q.forget('k');
    expect(q.addRateLimited('k')).to.equal(10);
    q.shutdown();
  });

  it('limits all retries together with a token bucket on top of the per-key backoff', () => {
    let clock = 0;
    const q = new WorkQueue(10, 60_000, { qps: 2, burst: 2, now: () => clock });
    // Two retries fit the burst; the third key waits for a token (500 ms at 2/s), the fourth for two.
    expect(['a', 'b', 'c', 'd'].map((k) => q.addRateLimited(k))).to.deep.equal([10, 10, 500, 1000]);
    clock += 10_000; // the bucket refills, up to its burst
    expect(['e', 'f', 'g'].map((k) => q.addRateLimited(k))).to.deep.equal([10, 10, 500]);
    q.shutdown();
  });

  it('lets the earliest of several delayed adds of a key win', async function () {
    // Generous for a loaded machine, far below the minute the later add would take.
    this.timeout(20_000);
    const q = new WorkQueue();
    q.addAfter('k', 60_000); // a periodic requeue
    q.addAfter('k', 10); // then a retry after a failure: must not wait for the minute
    expect(await q.get()).to.equal('k');
    q.done('k');
    q.addAfter('j', 10);
    q.addAfter('j', 60_000); // a later one does not postpone it either
    expect(await q.get()).to.equal('j');
    q.shutdown();
  });

  it('delivers delayed keys later and wakes waiting workers on shutdown', async () => {
    const q = new WorkQueue();
    q.addAfter('later', 20);
    expect(q.depth).to.equal(0);
    expect(await q.get()).to.equal('later');
    q.done('later');
    const pending = q.get();
    q.shutdown();
    expect(await pending).to.equal(undefined);
    q.add('ignored');
    expect(q.depth).to.equal(0);
  });
});
