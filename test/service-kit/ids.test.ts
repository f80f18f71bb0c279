import { expect } from 'chai';
import { validate, version } from 'uuid';
import { pooledRandomBytes, uuidV7 } from '../../images/service-kit/src/index.js';

describe('service kit: ids from pooled random bytes', () => {
  it('uuidV7: RFC 9562 version 7 ids carrying the current millisecond, all distinct', () => {
    const before = Date.now();
    const ids = Array.from({ length: 5000 }, () => uuidV7());
    const after = Date.now();
    expect(new Set(ids).size).to.equal(ids.length);
    for (const id of ids.slice(0, 50)) {
      expect(validate(id), id).to.equal(true);
      expect(version(id)).to.equal(7);
      expect(id[19], 'variant 10xx').to.match(/[89ab]/);
      const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
      expect(ms).to.be.within(before, after);
    }
  });

  it('pooledRandomBytes: never the same bytes twice across pool refills; views stay their own', () => {
    const first = pooledRandomBytes(16);
    const copy = Buffer.from(first);
    const seen = new Set<string>();
    // Well past one 4 KiB pool: refills must not reuse or overwrite what was handed out.
    for (let i = 0; i < 2000; i++) seen.add(pooledRandomBytes(16).toString('hex'));
    expect(seen.size).to.equal(2000);
    expect(first.equals(copy)).to.equal(true);
    expect(pooledRandomBytes(4096)).to.have.length(4096);
    expect(() => pooledRandomBytes(4097)).to.throw(RangeError);
  });
});
