import { expect } from 'chai';
import type { Readable } from 'node:stream';
import { aclHeaders, storedAcl, type AccessControlList, type Grant, type ObjectMeta, type PutObjectInput } from '../../images/object-model/src/index.js';
import { codeOf, handlerApp, type HandlerApp } from './handler-app.js';
import { FakeObjectLayer } from './fake-object-layer.js';

/** The fake layer keeping what ACL writes change (bucket configurations: the base's), objects' ACLs and the stored headers of new objects. */
class AclLayer extends FakeObjectLayer {
  async putObjectAcl(bucket: string, key: string, acl: AccessControlList | undefined): Promise<void> {
    this.calls.push({ op: 'putObjectAcl', args: [bucket, key, acl] });
    const o = this.objects.get(`${bucket}/${key}`)!;
    o.meta = { ...o.meta, headers: acl && aclHeaders(acl) };
  }

  override async putObject(bucket: string, key: string, input: PutObjectInput, body: Readable): Promise<{ object: ObjectMeta; instant: boolean }> {
    const answer = await super.putObject(bucket, key, input, body);
    const o = this.objects.get(`${bucket}/${key}`)!;
    o.meta = { ...o.meta, headers: input.headers };
    return answer;
  }
}

const grant = (id: string, permission: Grant['permission']): Grant => ({ grantee: { id }, permission });
const XSI = 'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"';
const policy = (...grants: string[]) =>
  `<AccessControlPolicy><Owner><ID>alice</ID></Owner><AccessControlList>${grants.map((g) => `<Grant>${g}</Grant>`).join('')}</AccessControlList></AccessControlPolicy>`;
const byEmail = (email: string, permission: string) =>
  `<Grantee ${XSI} xsi:type="AmazonCustomerByEmail"><EmailAddress>${email}</EmailAddress></Grantee><Permission>${permission}</Permission>`;
const byId = (id: string, permission: string) => `<Grantee ${XSI} xsi:type="CanonicalUser"><ID>${id}</ID></Grantee><Permission>${permission}</Permission>`;

/**
 * S3's grants by e-mail address (`emailAddress="..."` in x-amz-grant-*, AmazonCustomerByEmail in an
 * AccessControlPolicy): resolved to the user with that address when the ACL is written, kept and shown as that
 * user (CanonicalUser); an address no user has is 400 UnresolvableGrantByEmailAddress and the ACL stays as it was.
 */
describe('gateway handlers: grants by e-mail address', () => {
  let layer: AclLayer;
  let app: HandlerApp;
  let lookups: string[];
  const emails = { 'bob@example.com': 'bob', 'Carol@Example.org': 'carol' };

  beforeEach(async () => {
    layer = new AclLayer();
    layer.addBucket('shared', 'alice');
    layer.buckets.get('shared')!.ownership = [{ objectOwnership: 'ObjectWriter' }];
    layer.store('shared', 'doc.txt', Buffer.from('hello'));
    lookups = [];
    app = await handlerApp(layer, 'alice', { emails, lookups });
  });
  afterEach(() => app.close());

  const writes = () => layer.calls.filter((c) => c.op === 'putObjectAcl' || c.op === 'putBucketConfig' || c.op === 'putObject');

  it('PutObjectAcl with x-amz-grant-* naming emailAddress keeps the user it names, whatever the case; GetObjectAcl shows a CanonicalUser', async () => {
    const r = await app.fetch('PUT', '/shared/doc.txt?acl', {
      headers: { 'x-amz-grant-read': 'emailAddress="BOB@example.com", id="alice"', 'x-amz-grant-full-control': 'id="alice"' },
    });
    expect(r.status, await r.text()).to.equal(200);
    expect(storedAcl(layer.objects.get('shared/doc.txt')!.meta.headers)).to.deep.equal({
      owner: 'alice',
      grants: [grant('bob', 'READ'), grant('alice', 'READ'), grant('alice', 'FULL_CONTROL')],
    });
    const shown = await (await app.fetch('GET', '/shared/doc.txt?acl')).text();
    expect(shown).to.contain('xsi:type="CanonicalUser"><ID>bob</ID>');
    expect(shown).not.to.contain('EmailAddress');
    expect(lookups).to.deep.equal(['BOB@example.com']);
  });

  it('PutBucketAcl with an AccessControlPolicy grantee of type AmazonCustomerByEmail keeps the user; GetBucketAcl shows it by ID', async () => {
    const r = await app.fetch('PUT', '/shared?acl', { body: policy(byId('alice', 'FULL_CONTROL'), byEmail(' carol@example.org ', 'WRITE')) });
    expect(r.status, await r.text()).to.equal(200);
    expect(layer.buckets.get('shared')!.acl).to.deep.equal([grant('alice', 'FULL_CONTROL'), grant('carol', 'WRITE')]);
    const shown = await (await app.fetch('GET', '/shared?acl')).text();
    expect(shown).to.contain('<ID>carol</ID>');
    expect(shown).not.to.contain('EmailAddress');
  });

  it('an address no user has (or no address at all) is 400 UnresolvableGrantByEmailAddress, and nothing changes', async () => {
    const before = structuredClone(layer.objects.get('shared/doc.txt')!.meta);
    const bucketBefore = structuredClone(layer.buckets.get('shared'));
    const refusals = [
      app.fetch('PUT', '/shared/doc.txt?acl', { headers: { 'x-amz-grant-read': 'emailAddress="nobody@example.com"' } }),
      app.fetch('PUT', '/shared/doc.txt?acl', {
        body: policy(byId('alice', 'FULL_CONTROL'), byEmail('bob@example.com', 'READ'), byEmail('nobody@example.com', 'READ')),
      }),
      app.fetch('PUT', '/shared?acl', { headers: { 'x-amz-grant-write': 'emailAddress="not an address"' } }),
      app.fetch('PUT', '/shared/new.txt', { headers: { 'x-amz-grant-read': 'emailAddress="nobody@example.com"' }, body: 'x' }),
      app.fetch('POST', '/shared/big.bin?uploads', { headers: { 'x-amz-grant-read': 'emailAddress="nobody@example.com"' } }),
    ];
    for (const r of await Promise.all(refusals)) {
      const text = await r.text();
      expect([r.status, codeOf(text)]).to.deep.equal([400, 'UnresolvableGrantByEmailAddress']);
      expect(text).to.contain('The e-mail address you provided does not match any account on record.');
    }
    expect(writes()).to.deep.equal([]);
    expect(layer.calls.filter((c) => c.op === 'createMultipart')).to.deep.equal([]);
    expect(layer.objects.get('shared/doc.txt')!.meta).to.deep.equal(before);
    expect(layer.buckets.get('shared')).to.deep.equal(bucketBefore);
    // A malformed address is never looked up.
    expect(lookups).not.to.include('not an address');
  });

  it('PutObject with grants by e-mail looks each distinct address up once (whatever its case) and stores the users', async () => {
    const r = await app.fetch('PUT', '/shared/new.txt', {
      headers: {
        'x-amz-grant-read': 'emailAddress="bob@example.com", emailAddress="Bob@Example.COM", emailAddress="carol@example.org"',
        'x-amz-grant-read-acp': 'emailAddress="BOB@EXAMPLE.COM"',
      },
      body: 'new',
    });
    expect(r.status, await r.text()).to.equal(200);
    expect(lookups.map((e) => e.toLowerCase()).sort()).to.deep.equal(['bob@example.com', 'carol@example.org']);
    expect(storedAcl(layer.objects.get('shared/new.txt')!.meta.headers)?.grants).to.deep.equal([
      grant('bob', 'READ'),
      grant('bob', 'READ'),
      grant('carol', 'READ'),
      grant('bob', 'READ_ACP'),
    ]);
  });
});
