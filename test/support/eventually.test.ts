import { expect } from 'chai';
import { eventually } from './eventually.js';
import { rejectionOf } from './rejection.js';

describe('eventually (the tests’ one polling helper)', () => {
  it('waits for a predicate to turn true, and for an assertion to stop throwing', async () => {
    let calls = 0;
    expect(await eventually(() => ++calls >= 3, 'three calls')).to.equal(true);
    expect(calls).to.equal(3);
    let n = 0;
    await eventually(() => expect(++n).to.equal(4));
    expect(n).to.equal(4);
  });

  it('answers what the check answered once it held', async () => {
    let n = 0;
    const value = await eventually(async () => {
      n += 1;
      if (n < 2) throw new Error('not yet');
      return { n };
    });
    expect(value).to.deep.equal({ n: 2 });
  });

  it('fails after its timeout naming what it waited for, with the last error', async () => {
    const never = (await rejectionOf(eventually(() => false, 'the moon', 30))) as Error;
    expect(never.message).to.equal('timed out waiting for the moon');
    const failing = (await rejectionOf(eventually(() => expect(1).to.equal(2), 'one to be two', 30))) as Error;
    expect(failing.message).to.match(/^timed out waiting for one to be two: expected 1 to equal 2/);
  });
});
