import { expect } from 'chai';
import { queryOf } from '../../images/gateway/src/s3/router.js';

/** The router reads a query text once for the requests that send it (router.ts, queryOf): what it answers is read only. */
describe('gateway: request queries read once per text', () => {
  it('answers the same pairs for the same text, each text its own', () => {
    const a = queryOf('X-Amz-Date=20261205T100000Z&response-content-type=text%2Fplain&a+b=c%20d');
    expect([...a]).to.deep.equal([
      ['X-Amz-Date', '20261205T100000Z'],
      ['response-content-type', 'text/plain'],
      ['a b', 'c d'],
    ]);
    expect(queryOf('X-Amz-Date=20261205T100000Z&response-content-type=text%2Fplain&a+b=c%20d')).to.equal(a);
    expect([...queryOf('uploads')]).to.deep.equal([['uploads', '']]);
    expect(queryOf('list-type=2&prefix=p%2F').get('prefix')).to.equal('p/');
    expect([...queryOf('')]).to.deep.equal([]);
  });

  it('refuses to change a query another request may share', () => {
    const q = queryOf('acl');
    expect(() => q.set('acl', 'x')).to.throw(TypeError);
    expect(() => q.append('x', '1')).to.throw(TypeError);
    expect(() => q.delete('acl')).to.throw(TypeError);
    expect(() => q.sort()).to.throw(TypeError);
    expect([...queryOf('acl')]).to.deep.equal([['acl', '']]);
  });
});
