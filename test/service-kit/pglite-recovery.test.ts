import { expect } from 'chai';
import { DatabaseUnavailableError } from '../../images/service-kit/src/index.js';
import { reopeningPglite } from '../../images/service-kit/src/pglite-recovery.js';
import type { Logger } from '../../images/service-kit/src/logger.js';
import type { PgliteThread } from '../../images/service-kit/src/pglite-thread.js';
import { eventually } from '../support/eventually.js';

/** A thread that answers until `stop` is called; `ended` then resolves, as when its WAL sync failed. */
function fakeThread(name: string) {
  let stop!: (err: Error) => void;
  const ended = new Promise<Error>((resolve) => (stop = resolve));
  const thread = {
    kind: 'pglite' as const,
    ended,
    query: async () => ({ rows: [{ name }], rowCount: 1 }),
    exec: async () => undefined,
    transaction: async () => {
      throw new Error('not used');
    },
    durability: async () => undefined,
    close: async () => undefined,
  } as unknown as PgliteThread;
  return { thread, stop: () => stop(new Error(`${name}: WAL sync failed`)) };
}

/**
 * The reopening wrapper alone, over fake threads: when it opens the database again, and how long it waits.
 * The real thread, its faults and recovery from the WAL are test/service-kit/pglite-fsync.test.ts.
 */
describe('the embedded database opened again after its thread stopped (backoff)', () => {
  const delaysMs = { first: 40, max: 640 };

  it('keeps doubling its wait while each new thread stops soon after opening (the disk failing on every write)', async () => {
    const first = fakeThread('first');
    const opens: number[] = [];
    const threads: ReturnType<typeof fakeThread>[] = [];
    const sql = reopeningPglite(
      async () => {
        opens.push(Date.now());
        const next = fakeThread(`thread ${opens.length}`);
        threads.push(next);
        return next.thread;
      },
      first.thread,
      { delaysMs },
    );
    try {
      const stoppedAt = Date.now();
      first.stop();
      // Each reopened thread stops right away, as the next write's sync fails again.
      for (let i = 0; i < 4; i++) {
        await eventually(async () => expect(threads.length).to.equal(i + 1), `reopen ${i + 1}`, 5_000);
        threads[i]!.stop();
      }
      await eventually(async () => expect(opens.length).to.equal(5), 'reopen 5', 5_000);
      const waits = opens.map((at, i) => at - (i === 0 ? stoppedAt : opens[i - 1]!));
      // 40, 80, 160, 320, 640 ms: no try comes sooner than its doubled delay (before, each was 40 ms).
      waits.forEach((wait, i) => expect(wait, `wait ${i + 1} of ${waits.join(', ')}`).to.be.at.least(delaysMs.first * 2 ** i - 5));
      expect((await sql.query('SELECT 1')).rows).to.deep.equal([{ name: 'thread 5' }]);
    } finally {
      await sql.close();
    }
  });

  it('starts its backoff afresh for a thread that ran longer than the longest wait, and refuses statements meanwhile', async () => {
    const first = fakeThread('first');
    const threads: ReturnType<typeof fakeThread>[] = [];
    // The attempt each stop schedules, as the operator's log shows it.
    const attempts: number[] = [];
    const logger = {
      error: (fields: { attempt?: number }, msg: string) => {
        if (msg.includes('stopped')) attempts.push(fields.attempt ?? -1);
      },
      warn: () => undefined,
    } as unknown as Logger;
    const sql = reopeningPglite(
      async () => {
        const next = fakeThread(`thread ${threads.length + 1}`);
        threads.push(next);
        return next.thread;
      },
      first.thread,
      { delaysMs: { first: 20, max: 150 }, logger },
    );
    try {
      first.stop();
      await new Promise((resolve) => setImmediate(resolve)); // the stop is seen once its promise settles
      expect(await sql.query('SELECT 1').catch((err: unknown) => err)).to.be.instanceOf(DatabaseUnavailableError);
      await eventually(async () => expect(threads.length).to.equal(1), 'reopened', 5_000);
      threads[0]!.stop(); // soon after opening: the next try waits longer
      await eventually(async () => expect(threads.length).to.equal(2), 'reopened again', 5_000);
      await new Promise((resolve) => setTimeout(resolve, 200)); // ran longer than max
      threads[1]!.stop();
      await eventually(async () => expect(threads.length).to.equal(3), 'reopened a third time', 5_000);
      expect(attempts).to.deep.equal([1, 2, 1]);
      expect((await sql.query('SELECT 1')).rows).to.deep.equal([{ name: 'thread 3' }]);
    } finally {
      await sql.close();
    }
  });
});
