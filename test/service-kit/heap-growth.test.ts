import v8 from 'node:v8';
import { expect } from 'chai';
import { applyHeapGrowth, ConfigError, DEFAULT_HEAP_GROWING_PERCENT } from '../../images/service-kit/src/index.js';

/** The old-generation growing factor the byte-moving services start with (STRATA_HEAP_GROWING_PERCENT). */
describe('service kit: heap growth', () => {
  let flags: string[];
  const setFlags = v8.setFlagsFromString;
  beforeEach(() => {
    flags = [];
    // Record what would reach V8 (the flag itself is harmless, but the test process keeps its own GC pacing).
    (v8 as { setFlagsFromString: (f: string) => void }).setFlagsFromString = (f: string) => void flags.push(f);
  });
  afterEach(() => {
    (v8 as { setFlagsFromString: (f: string) => void }).setFlagsFromString = setFlags;
  });

  it('applies 200 % by default and the percent STRATA_HEAP_GROWING_PERCENT gives', () => {
    expect(applyHeapGrowth({})).to.equal(DEFAULT_HEAP_GROWING_PERCENT);
    expect(applyHeapGrowth({ STRATA_HEAP_GROWING_PERCENT: '350' })).to.equal(350);
    expect(flags).to.deep.equal([`--heap-growing-percent=${DEFAULT_HEAP_GROWING_PERCENT}`, '--heap-growing-percent=350']);
  });

  it('leaves V8 its own factor with 0', () => {
    expect(applyHeapGrowth({ STRATA_HEAP_GROWING_PERCENT: '0' })).to.equal(0);
    expect(flags).to.deep.equal([]);
  });

  it('refuses a value that is not a whole percent from 0 to 1000, naming the variable', () => {
    for (const bad of ['-1', '1001', 'lots', '2.5']) {
      expect(() => applyHeapGrowth({ STRATA_HEAP_GROWING_PERCENT: bad }), bad).to.throw(ConfigError, /STRATA_HEAP_GROWING_PERCENT/);
    }
    expect(flags).to.deep.equal([]);
  });
});
