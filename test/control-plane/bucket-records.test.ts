import { expect } from 'chai';
import { startObjectLayer, type ObjectLayer } from '../data-plane/harness.js';

/**
 * The control plane answers a bucket's current record (hack/adr/0007-bucket-resolution.md): it keeps no
 * cache of its own, so a change committed by another replica (or one whose cache invalidation was lost,
 * or raced a concurrent read) is seen at once, never after a cache entry's lifetime.
 */
describe('control plane: bucket records are read as committed', function () {
  this.timeout(120_000);
  let layer: ObjectLayer;

  before(async () => {
    layer = await startObjectLayer('pglite');
  });
  after(async () => {
    await layer?.stop();
  });

  const ownerOf = async (name: string) => {
    const res = await layer.cpFetch('GET', `/internal/buckets/${name}`);
    return res.status === 200 ? ((await res.json()) as { owner: string }).owner : res.status;
  };

  it('answers a change committed elsewhere at once', async () => {
    expect((await layer.cpFetch('PUT', '/internal/buckets/records', { owner: 'alice' })).status).to.equal(200);
    expect(await ownerOf('records')).to.equal('alice');
    // Another replica's delete and another account's create of the name, committed behind this one's back.
    await layer.sql.query("UPDATE buckets SET owner = 'bob' WHERE name = 'records'");
    expect(await ownerOf('records')).to.equal('bob');
    await layer.sql.query("DELETE FROM buckets WHERE name = 'records'");
    expect(await ownerOf('records')).to.equal(404);
  });

  it('a bucket created with ownership controls and an ACL has them in its first committed record', async () => {
    const ownership = [{ objectOwnership: 'ObjectWriter' }];
    const acl = [{ grantee: { group: 'http://acs.amazonaws.com/groups/global/AllUsers' }, permission: 'READ' }];
    const res = await layer.cpFetch('PUT', '/internal/buckets/made-whole', { owner: 'alice', ownership, acl });
    expect(res.status).to.equal(200);
    expect(await res.json()).to.deep.include({ ownership, acl });
    const { rows } = await layer.sql.query<{ ownership: unknown; acl: unknown }>("SELECT ownership, acl FROM buckets WHERE name = 'made-whole'");
    expect(rows).to.deep.equal([{ ownership, acl }]);
    // Malformed ones are refused before anything is made.
    const bad = await layer.cpFetch('PUT', '/internal/buckets/made-badly', { owner: 'alice', ownership: [] });
    expect(bad.status).to.equal(400);
    expect(await ownerOf('made-badly')).to.equal(404);
  });
});
