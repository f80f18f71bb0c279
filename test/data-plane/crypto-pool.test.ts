import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { CHUNK, PlainWindow, SegmentEncryptor } from '../../images/data-plane/src/encryption/chunked-aead.js';
import { CryptoPool, type PoolStream } from '../../images/data-plane/src/encryption/crypto-pool.js';
import { CRYPTO_THREAD_SOURCE } from '../../images/data-plane/src/encryption/crypto-threads.js';
import { ThreadedSegmentDecryptor } from '../../images/data-plane/src/encryption/decrypt-thread.js';

/**
 * Threads that answer each job after `ms` of busy work (so that jobs queue up in the pool), and end
 * themselves, uncaught, on a job that asks them to.
 */
const TEST_SOURCE = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (m) => {
  if (m.crash) throw new Error('thread crashed');
  const until = Date.now() + (m.ms ?? 2);
  while (Date.now() < until);
  parentPort.postMessage({ id: m.id, tag: m.tag });
});
`;

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as Error,
  );

describe('data plane: the encryption threads (CryptoPool)', () => {
  const pools: CryptoPool[] = [];
  const poolOf = (size: number, source = TEST_SOURCE) => {
    const p = new CryptoPool(source, size, 'test-crypto');
    pools.push(p);
    return p;
  };
  after(async () => {
    for (const p of pools) await p.close();
  });

  it("serves tenants in turn: one tenant's many streams do not starve another's single stream", async () => {
    const pool = poolOf(1);
    const done: string[] = [];
    const jobs: Array<Promise<unknown>> = [];
    const submit = (stream: PoolStream, tag: string, n: number) => {
      for (let i = 0; i < n; i++) jobs.push(stream.run({ tag }).then(() => done.push(tag)));
    };
    // Tenant A opens four streams of 10 jobs each before tenant B's one stream of 10.
    for (let s = 0; s < 4; s++) submit(pool.stream('A'), `A${s}`, 10);
    submit(pool.stream('B'), 'B', 10);
    await Promise.all(jobs);
    // B's ten jobs are done by the time about twice as many are: turns alternate between tenants (the
    // first jobs went to the idle thread before B had asked).
    const lastB = done.lastIndexOf('B');
    expect(lastB, done.join(' ')).to.be.at.most(2 * 10 + 2);
    // And within tenant A its streams take turns: after the first two, no stream runs twice before each ran once.
    const a = done.filter((t) => t.startsWith('A')).slice(2, 34);
    for (let i = 0; i + 4 <= a.length; i += 4) expect(new Set(a.slice(i, i + 4)).size, a.join(' ')).to.be.at.least(3);
  });

  it('a thread that fails fails only the job that failed it; the other jobs it held run again and complete', async () => {
    const pool = poolOf(2);
    const victim = pool.stream('A');
    const other = pool.stream('B');
    const bystander = pool.stream('A');
    const crashed = victim.run({ crash: true });
    const others = [...Array.from({ length: 8 }, () => other.run({ ms: 5 })), ...Array.from({ length: 8 }, () => bystander.run({ ms: 5 }))];
    expect((await failure(crashed))?.message).to.match(/crashed|exited/);
    const results = await Promise.allSettled(others);
    // Every job of the other streams completes, those the failed thread held beside the crashing one included.
    expect(results.filter((r) => r.status === 'rejected')).to.deep.equal([]);
    // The pool goes on: a new thread takes the next jobs.
    expect((await pool.stream('C').run({ tag: 'after' })).tag).to.equal('after');
    expect(pool.threadCount).to.be.at.least(1);
  });

  it('a closed stream drops its queued jobs, and threads keep serving other streams', async () => {
    const pool = poolOf(1);
    const busy = pool.stream('A');
    const closing = pool.stream('B');
    const first = [busy.run({ ms: 20 }), busy.run({ ms: 20 })];
    const dropped = closing.run({ ms: 1 });
    closing.close();
    expect((await failure(dropped))?.message).to.match(/closed/);
    await Promise.all(first);
    expect(await failure(closing.run({})))?.to.be.instanceOf(Error);
  });

  it('a decryption stream on a thread that fails ends with that error; another read on the pool is unaffected', async () => {
    const key = randomBytes(32);
    const size = 8 * 16 * CHUNK;
    const data = randomBytes(size);
    const encryptor = new SegmentEncryptor(key, () => undefined, size);
    const stored = (await Promise.all([Readable.from(encryptor).toArray(), pipeline(Readable.from([data]), encryptor)]))[0] as Buffer[];
    const bytes = Buffer.concat(stored);
    // The real thread code, but a thread that is given tenant "doomed"'s key ends.
    const doomedKey = randomBytes(32);
    const source = CRYPTO_THREAD_SOURCE.replace(
      "parentPort.on('message', (m) => {",
      `parentPort.on('message', (m) => {\n  if (Buffer.from(m.key).equals(Buffer.from('${doomedKey.toString('hex')}', 'hex'))) throw new Error('thread crashed');`,
    );
    const pool = poolOf(2, source);
    const read = (k: Buffer, tenant: string) => {
      const decryptor = new ThreadedSegmentDecryptor(undefined, { key: k, window: new PlainWindow(size, 0, 0, size), tenant, threads: pool });
      return Promise.all([Readable.from(decryptor).toArray(), pipeline(Readable.from([bytes]), decryptor)]).then(([c]) => Buffer.concat(c as Buffer[]));
    };
    const [good, doomed] = await Promise.allSettled([read(key, 'A'), read(doomedKey, 'B')]);
    expect(doomed.status).to.equal('rejected');
    expect(good.status).to.equal('fulfilled');
    expect((good as PromiseFulfilledResult<Buffer>).value.equals(data)).to.equal(true);
  });

  it('closing the pool settles every job: those on threads, those still queued, and those asked for after', async () => {
    const pool = new CryptoPool(TEST_SOURCE, 1, 'test-crypto');
    const stream = pool.stream('alice');
    // One thread holds two jobs at most: the rest wait in the pool's queue.
    const jobs = Array.from({ length: 5 }, (_, i) => failure(stream.run({ tag: i, ms: 200 })));
    await new Promise((resolve) => setTimeout(resolve, 50));
    await pool.close();
    const settled = await Promise.race([Promise.all(jobs), new Promise((resolve) => setTimeout(() => resolve('hung'), 2_000))]);
    expect(settled).to.be.an('array');
    for (const err of settled as Array<Error | undefined>) expect(err).to.be.instanceOf(Error);
    expect(await failure(pool.stream('bob').run({ tag: 'late' }))).to.be.instanceOf(Error);
  });
});
