import { expect } from 'chai';
import { cannedGrants, storedAcl, type PutObjectInput } from '../../images/object-model/src/index.js';
import { codeOf, handlerApp, type HandlerApp } from './handler-app.js';
import { FakeObjectLayer } from './fake-object-layer.js';

/** A multipart/form-data body of `fields` then the file (what a browser's form sends). */
function form(fields: Record<string, string>, file: string): { headers: Record<string, string>; body: string } {
  const boundary = '----strata-anonymous-form';
  const parts = Object.entries(fields).map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
  parts.push(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\nContent-Type: text/plain\r\n\r\n${file}\r\n`);
  return { headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body: `${parts.join('')}--${boundary}--\r\n` };
}

/**
 * Anonymous writes where a bucket's ACL grants WRITE to AllUsers (`public-read-write`), as S3 allows them
 * while ACLs are in force: PutObject, a form upload without a policy, DeleteObject(s). The object is the
 * bucket owner's (its row and its ACL), never an instant upload, and a public access block still rules.
 */
describe('gateway handlers: anonymous writes into a bucket whose ACL grants AllUsers WRITE', () => {
  let layer: FakeObjectLayer;
  const apps: HandlerApp[] = [];
  const app = async (user: string | null, opts: { platformBlocksPublic?: boolean } = {}) => {
    const made = await handlerApp(layer, user, opts);
    apps.push(made);
    return made;
  };
  const answer = async (r: Response) => {
    const text = await r.text();
    return r.status < 300 ? r.status : `${r.status} ${codeOf(text)}`;
  };
  const putInput = (i = 0) => layer.callsOf('putObject')[i]![2] as PutObjectInput;

  beforeEach(() => {
    layer = new FakeObjectLayer();
    const withAcl = (name: string, ownership: 'ObjectWriter' | 'BucketOwnerEnforced', canned: 'public-read-write' | 'public-read') => {
      layer.addBucket(name, 'alice');
      const b = layer.buckets.get(name)!;
      b.ownership = [{ objectOwnership: ownership }];
      b.acl = cannedGrants(canned, 'alice', 'alice');
    };
    withAcl('dropbox', 'ObjectWriter', 'public-read-write');
    withAcl('readonly', 'ObjectWriter', 'public-read');
    // Grants kept from before ACLs were turned off count for nothing (S3's BucketOwnerEnforced).
    withAcl('enforced', 'BucketOwnerEnforced', 'public-read-write');
    layer.store('dropbox', 'old.txt', Buffer.from('old'));
    layer.store('readonly', 'old.txt', Buffer.from('old'));
  });
  afterEach(async () => {
    for (const a of apps.splice(0)) await a.close();
  });

  it('PutObject: stored as the bucket owner’s object (row owner, no ACL of its own: private to the bucket owner), never an instant upload', async () => {
    const anon = await app(null);
    const r = await anon.fetch('PUT', '/dropbox/drop.txt', { body: 'dropped', headers: { 'x-service-md5': 'b5e3a3f8e6f7e0a1b2c3d4e5f6a7b8c9' } });
    expect(await answer(r)).to.equal(200);
    expect(layer.objects.get('dropbox/drop.txt')?.bytes.toString()).to.equal('dropped');
    expect(putInput()).to.include({ owner: 'alice' });
    expect(putInput().instantMd5).to.equal(undefined);
    expect(storedAcl(putInput().headers)).to.equal(undefined);
  });

  it('PutObject with x-amz-acl public-read: the ACL’s owner is the bucket owner, AllUsers may read it', async () => {
    const anon = await app(null);
    expect(await answer(await anon.fetch('PUT', '/dropbox/pub.txt', { body: 'pub', headers: { 'x-amz-acl': 'public-read' } }))).to.equal(200);
    expect(storedAcl(putInput().headers)).to.deep.equal({ owner: 'alice', grants: cannedGrants('public-read', 'alice', 'alice') });
  });

  it('refused with AccessDenied where the bucket grants AllUsers no WRITE, or has ACLs off; nothing is stored or deleted', async () => {
    const anon = await app(null);
    expect(await answer(await anon.fetch('PUT', '/readonly/drop.txt', { body: 'x' }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('PUT', '/enforced/drop.txt', { body: 'x' }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('DELETE', '/readonly/old.txt'))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('POST', '/readonly', form({ key: 'f.txt' }, 'x')))).to.equal('403 AccessDenied');
    expect(layer.callsOf('putObject')).to.have.length(0);
    expect(layer.objects.has('readonly/old.txt')).to.equal(true);
  });

  it('DeleteObject and DeleteObjects: WRITE on the bucket deletes for anonymous callers too', async () => {
    const anon = await app(null);
    expect(await answer(await anon.fetch('DELETE', '/dropbox/old.txt'))).to.equal(204);
    expect(layer.objects.has('dropbox/old.txt')).to.equal(false);
    layer.store('dropbox', 'two.txt', Buffer.from('2'));
    const doc = '<Delete><Object><Key>two.txt</Key></Object></Delete>';
    expect(await answer(await anon.fetch('POST', '/dropbox?delete', { body: doc }))).to.equal(200);
    expect(layer.objects.has('dropbox/two.txt')).to.equal(false);
  });

  it('a form upload with no policy and no credential is anonymous: stored as the bucket owner’s, with the ACL its acl field asks', async () => {
    const anon = await app(null);
    const r = await anon.fetch('POST', '/dropbox', form({ key: 'form/${filename}', acl: 'public-read', 'Content-Type': 'text/plain' }, 'bar'));
    expect(await answer(r)).to.equal(204);
    expect(layer.objects.get('dropbox/form/f.txt')?.bytes.toString()).to.equal('bar');
    expect(putInput()).to.include({ owner: 'alice', contentType: 'text/plain' });
    expect(storedAcl(putInput().headers)?.owner).to.equal('alice');
    // A form that names a credential is a signed one: its policy must be there and hold.
    const signed = await anon.fetch('POST', '/dropbox', form({ key: 'signed.txt', 'x-amz-credential': 'AKIDEXAMPLE/20260102/us-east-1/s3/aws4_request' }, 'x'));
    expect(await answer(signed)).to.equal('403 AccessDenied');
    expect(layer.objects.has('dropbox/signed.txt')).to.equal(false);
  });

  it('the platform public access block ignores the AllUsers WRITE grant (IgnorePublicAcls) and refuses setting public-read-write (BlockPublicAcls)', async () => {
    const anon = await app(null, { platformBlocksPublic: true });
    expect(await answer(await anon.fetch('PUT', '/dropbox/drop.txt', { body: 'x' }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('DELETE', '/dropbox/old.txt'))).to.equal('403 AccessDenied');
    expect(layer.objects.has('dropbox/drop.txt')).to.equal(false);
    const owner = await app('alice', { platformBlocksPublic: true });
    expect(await answer(await owner.fetch('PUT', '/readonly?acl', { headers: { 'x-amz-acl': 'public-read-write' } }))).to.equal('403 AccessDenied');
  });

  it('anonymous operations an ACL cannot open stay AccessDenied: copies, multipart uploads, ACL writes', async () => {
    const anon = await app(null);
    expect(await answer(await anon.fetch('PUT', '/dropbox/copy.txt', { headers: { 'x-amz-copy-source': '/dropbox/old.txt' } }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('POST', '/dropbox/big.bin?uploads'))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('PUT', '/dropbox/old.txt?acl', { headers: { 'x-amz-acl': 'public-read' } }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('PUT', '/dropbox?acl', { headers: { 'x-amz-acl': 'private' } }))).to.equal('403 AccessDenied');
  });

  it('PutObject with Transfer-Encoding: chunked and no Content-Length is stored whole (its length unknown ahead)', async () => {
    const alice = await app('alice');
    const body = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('streamed '));
        c.enqueue(new TextEncoder().encode('body'));
        c.close();
      },
    });
    const r = await fetch(`${alice.url}/dropbox/streamed.txt`, { method: 'PUT', body, duplex: 'half' } as RequestInit);
    expect(await answer(r)).to.equal(200);
    expect(layer.objects.get('dropbox/streamed.txt')?.bytes.toString()).to.equal('streamed body');
    expect(putInput().contentLength).to.equal(undefined);
    // A streamed UploadPart is still MissingContentLength (S3's 411): parts keep their declared sizes.
    const { uploadId } = await layer.createMultipart('dropbox', 'big.bin', { owner: 'alice' });
    const part = await fetch(`${alice.url}/dropbox/big.bin?partNumber=1&uploadId=${uploadId}`, {
      method: 'PUT',
      body: new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode('part'));
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(await answer(part)).to.equal('411 MissingContentLength');
  });
});
