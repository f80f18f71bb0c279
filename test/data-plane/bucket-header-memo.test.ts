import { expect } from 'chai';
import { lastTextRemembered } from '../../images/data-plane/src/http/routes.js';
import { BUCKET_HEADER, encodeWireHeader, readWireHeader } from '../../images/object-model/src/index.js';

describe('data plane: x-strata-bucket read once per text (lastTextRemembered)', () => {
  it('answers the same text from memory, reads another text anew, and refuses a malformed one every time', () => {
    let reads = 0;
    const read = lastTextRemembered((raw) => {
      reads++;
      return readWireHeader(BUCKET_HEADER, raw);
    });
    const a = encodeWireHeader(BUCKET_HEADER, { id: 1, name: 'a', owner: 'alice', backend: { kind: 'fs' } });
    const b = encodeWireHeader(BUCKET_HEADER, { id: 2, name: 'b', owner: 'bob', backend: { kind: 'fs' } });
    expect(read(a)).to.include({ id: 1, name: 'a', owner: 'alice' });
    expect(read(a)).to.include({ id: 1, name: 'a' });
    expect(reads).to.equal(1);
    expect(read(b)).to.include({ id: 2, name: 'b', owner: 'bob' });
    expect(read(a)).to.include({ id: 1, name: 'a' });
    expect(reads).to.equal(3);
    expect(read(undefined)).to.equal(undefined);
    for (let i = 0; i < 2; i++)
      expect(() => read('{"id":"not a number"}'))
        .to.throw()
        .with.property('code');
    expect(read(a)).to.include({ id: 1 });
  });
});
