import { expect } from 'chai';
import { cachedLookup } from '../../images/service-kit/src/index.js';

/** A lookup of `<key>!` that answers once released, on a clock the test moves (60 ms TTL), with its hit counts and calls. */
function gatedLookup() {
  const state = { hits: [] as boolean[], lookups: 0, now: 1_000, release: () => undefined as void };
  const gate = new Promise<void>((r) => (state.release = r));
  const get = cachedLookup(
    async (key) => {
      state.lookups++;
      await gate;
      return `${key}!`;
    },
    60,
    { onLookup: (hit) => state.hits.push(hit), now: () => state.now },
  );
  return { get, state };
}

describe('service kit: cached lookups', () => {
  it('answers from memory within the TTL, shares concurrent misses, forgets failures, expired and forgotten keys', async () => {
    const calls: string[] = [];
    const hits: boolean[] = [];
    let fail = false;
    let now = 1_000;
    const get = cachedLookup(
      async (key) => {
        calls.push(key);
        await new Promise((r) => setTimeout(r, 5));
        if (fail) throw new Error(`no ${key}`);
        return `${key}-${calls.length}`;
      },
      60,
      { onLookup: (hit) => hits.push(hit), now: () => now },
    );
    expect(await Promise.all([get('a'), get('a')])).to.deep.equal(['a-1', 'a-1']);
    expect(await get('a')).to.equal('a-1');
    expect(calls).to.deep.equal(['a']);
    expect(hits).to.deep.equal([false, true, true]);

    get.forget('a');
    expect(await get('a')).to.equal('a-2');
    now += 59;
    expect(await get('a')).to.equal('a-2');
    now += 1;
    expect(await get('a')).to.equal('a-3');

    fail = true;
    expect(await get('b').catch((err: Error) => err.message)).to.equal('no b');
    fail = false;
    expect(await get('b')).to.equal('b-5'); // the failure was not remembered
  });

  it('keeps at most maxEntries keys, dropping the oldest', async () => {
    let n = 0;
    const get = cachedLookup(async (key) => `${key}-${++n}`, 60_000, { maxEntries: 2 });
    await get('a');
    await get('b');
    await get('c'); // a goes
    expect(await get('b')).to.equal('b-2');
    expect(await get('a')).to.equal('a-4');
  });

  it('peeks at a fresh entry without a lookup and without counting it: its promise, and its value once it has come', async () => {
    const { get, state } = gatedLookup();
    expect(get.peek('a')).to.equal(undefined);
    const pending = get('a');
    const early = get.peek('a')!;
    expect(early.settled).to.equal(undefined);
    state.release();
    expect(await early.pending).to.equal('a!');
    await pending;
    expect(get.peek('a')!.settled).to.deep.equal({ value: 'a!' });
    expect(state.hits).to.deep.equal([false]);
    state.now += 60;
    expect(get.peek('a')).to.equal(undefined);
  });

  it('tells a fresh value that has come without a promise, counted as a hit; nothing while it is on its way or once expired', async () => {
    const { get, state } = gatedLookup();
    expect(get.known('a')).to.equal(undefined);
    const pending = get('a');
    expect(get.known('a')).to.equal(undefined);
    state.release();
    await pending;
    expect(get.known('a')).to.equal('a!');
    expect(get.known('a')).to.equal('a!');
    expect(state.hits).to.deep.equal([false, true, true]);
    state.now += 60;
    expect(get.known('a')).to.equal(undefined);
    expect(state.hits).to.have.length(3);
    expect(state.lookups).to.equal(1);
  });
});
