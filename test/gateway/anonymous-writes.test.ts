import { expect } from 'chai';
import {
  aclHeaders,
  cannedGrants,
  S3Error,
  storedAcl,
  type BucketInfo,
  type CompletedPart,
  type CopyObjectInput,
  type CreateMultipartInput,
  type ListPartsResult,
  type NamedChecksum,
  type ObjectMeta,
  type PutObjectInput,
  type WriteConditions,
} from '../../images/object-model/src/index.js';
import { codeOf, handlerApp, type HandlerApp } from './handler-app.js';
import { FakeObjectLayer } from './fake-object-layer.js';

/** A multipart/form-data body of `fields` then the file (what a browser's form sends). */
function form(fields: Record<string, string>, file: string): { headers: Record<string, string>; body: string } {
  const boundary = '----strata-anonymous-form';
  const parts = Object.entries(fields).map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
  parts.push(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\nContent-Type: text/plain\r\n\r\n${file}\r\n`);
  return { headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body: `${parts.join('')}--${boundary}--\r\n` };
}

/** The fake layer keeping whether each upload was begun anonymously, and answering ListParts with it (as the data plane). */
class AnonymousUploadsLayer extends FakeObjectLayer {
  readonly anonymous = new Set<string>();
  /** Whether each completion was asked anonymously (what fences it to the bucket that admitted it). */
  readonly completedAnonymously: boolean[] = [];

  override async createMultipart(bucket: string, key: string, input: CreateMultipartInput): Promise<{ uploadId: string }> {
    const made = await super.createMultipart(bucket, key, input);
    if (input.anonymous) this.anonymous.add(made.uploadId);
    return made;
  }

  override async completeMultipart(
    bucket: string,
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    conditions?: WriteConditions,
    _checksum?: NamedChecksum,
    _bucketRecord?: BucketInfo,
    anonymous?: boolean,
  ): Promise<ObjectMeta> {
    this.completedAnonymously.push(anonymous === true);
    return super.completeMultipart(bucket, key, uploadId, parts, conditions);
  }

  async listParts(bucket: string, key: string, uploadId: string): Promise<ListPartsResult> {
    const u = this.uploads.get(uploadId);
    if (!u || u.bucket !== bucket || u.key !== key) throw new S3Error('NoSuchUpload', undefined, { UploadId: uploadId });
    return {
      parts: [],
      isTruncated: false,
      initiated: '2026-01-02T03:04:05.000Z',
      owner: u.owner,
      ...(this.anonymous.has(uploadId) ? { anonymous: true } : {}),
    };
  }
}

/**
 * Anonymous writes where a bucket's ACL grants WRITE to AllUsers (`public-read-write`), as S3 allows them
 * while ACLs are in force: PutObject, a form upload without a policy, DeleteObject(s), CopyObject, multipart
 * uploads (an upload begun anonymously is listed and aborted by anonymous callers and the bucket owner only). The
 * object is the bucket owner's (its row and its ACL), never an instant upload, and a public access block still rules.
 */
describe('gateway handlers: anonymous writes into a bucket whose ACL grants AllUsers WRITE', () => {
  let layer: AnonymousUploadsLayer;
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
  const uploadIdOf = async (r: Response) => {
    const text = await r.text();
    expect(r.status, text).to.equal(200);
    return /<UploadId>([^<]+)<\/UploadId>/.exec(text)![1]!;
  };
  const complete = (etag: string) => `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${etag}</ETag></Part></CompleteMultipartUpload>`;

  beforeEach(() => {
    layer = new AnonymousUploadsLayer();
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

  it('CopyObject: WRITE on the destination bucket and READ on the source object, both granted to AllUsers; the copy is the bucket owner’s', async () => {
    layer.store('readonly', 'public.txt', Buffer.from('public'), {
      headers: aclHeaders({ owner: 'alice', grants: cannedGrants('public-read', 'alice', 'alice') }),
    });
    const anon = await app(null);
    const copied = await anon.fetch('PUT', '/dropbox/copy.txt', { headers: { 'x-amz-copy-source': '/readonly/public.txt', 'x-amz-acl': 'public-read' } });
    expect(await answer(copied)).to.equal(200);
    const input = layer.callsOf('copyObject')[0]![2] as CopyObjectInput;
    expect(input).to.include({ owner: 'alice', anonymous: true, sourceBucket: 'readonly', sourceKey: 'public.txt' });
    expect(storedAcl(input.headers)).to.deep.equal({ owner: 'alice', grants: cannedGrants('public-read', 'alice', 'alice') });
    expect(layer.objects.get('dropbox/copy.txt')?.bytes.toString()).to.equal('public');
    // A source it may not read (private), a destination it may not write (public-read, ACLs off, public ACLs ignored): refused.
    expect(await answer(await anon.fetch('PUT', '/dropbox/copy2.txt', { headers: { 'x-amz-copy-source': '/dropbox/old.txt' } }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('PUT', '/readonly/copy.txt', { headers: { 'x-amz-copy-source': '/readonly/public.txt' } }))).to.equal(
      '403 AccessDenied',
    );
    expect(await answer(await anon.fetch('PUT', '/enforced/copy.txt', { headers: { 'x-amz-copy-source': '/readonly/public.txt' } }))).to.equal(
      '403 AccessDenied',
    );
    const blocked = await app(null, { platformBlocksPublic: true });
    expect(await answer(await blocked.fetch('PUT', '/dropbox/copy3.txt', { headers: { 'x-amz-copy-source': '/readonly/public.txt' } }))).to.equal(
      '403 AccessDenied',
    );
    expect(layer.callsOf('copyObject')).to.have.length(1);
    // A signed copy is not marked anonymous.
    expect(await answer(await (await app('bob')).fetch('PUT', '/dropbox/bob.txt', { headers: { 'x-amz-copy-source': '/readonly/public.txt' } }))).to.equal(200);
    expect(layer.callsOf('copyObject')[1]![2]).to.include({ owner: 'bob' }).and.not.to.have.property('anonymous');
  });

  it('anonymous operations an ACL cannot open stay AccessDenied: ACL writes (UploadPartCopy: below)', async () => {
    const anon = await app(null);
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

  it('create, upload a part and complete anonymously: the upload and the object are the bucket owner’s, with the ACL asked for', async () => {
    const anon = await app(null);
    const uploadId = await uploadIdOf(await anon.fetch('POST', '/dropbox/big.bin?uploads', { headers: { 'x-amz-acl': 'public-read' } }));
    const created = layer.callsOf('createMultipart')[0]![2] as CreateMultipartInput;
    expect(created).to.include({ owner: 'alice', anonymous: true });
    expect(storedAcl(created.headers)).to.deep.equal({ owner: 'alice', grants: cannedGrants('public-read', 'alice', 'alice') });
    const part = await anon.fetch('PUT', `/dropbox/big.bin?partNumber=1&uploadId=${uploadId}`, { body: 'part one' });
    expect(part.status, await part.clone().text()).to.equal(200);
    const done = await anon.fetch('POST', `/dropbox/big.bin?uploadId=${uploadId}`, { body: complete(part.headers.get('etag')!) });
    expect(await answer(done)).to.equal(200);
    expect(layer.objects.get('dropbox/big.bin')?.bytes.toString()).to.equal('part one');
    expect(layer.completedAnonymously).to.deep.equal([true]);
    // A signed caller's upload is not marked anonymous.
    await uploadIdOf(await (await app('bob')).fetch('POST', '/dropbox/signed.bin?uploads'));
    expect(layer.callsOf('createMultipart')[1]![2]).not.to.have.property('anonymous');
  });

  it('ListParts and AbortMultipartUpload: an upload begun anonymously is its anonymous initiator’s and the bucket owner’s, no other user’s', async () => {
    const anon = await app(null);
    const alice = await app('alice');
    const bob = await app('bob');
    const anonymousUpload = await uploadIdOf(await anon.fetch('POST', '/dropbox/a.bin?uploads'));
    const aliceUpload = await uploadIdOf(await alice.fetch('POST', '/dropbox/b.bin?uploads'));
    const bobUpload = await uploadIdOf(await bob.fetch('POST', '/dropbox/c.bin?uploads'));
    expect(await answer(await anon.fetch('GET', `/dropbox/a.bin?uploadId=${anonymousUpload}`))).to.equal(200);
    expect(await answer(await alice.fetch('GET', `/dropbox/a.bin?uploadId=${anonymousUpload}`))).to.equal(200);
    // bob may write to the bucket (AllUsers WRITE) but did not begin the upload.
    expect(await answer(await bob.fetch('GET', `/dropbox/a.bin?uploadId=${anonymousUpload}`))).to.equal('403 AccessDenied');
    expect(await answer(await bob.fetch('DELETE', `/dropbox/a.bin?uploadId=${anonymousUpload}`))).to.equal('403 AccessDenied');
    // An anonymous caller is no signed user's initiator: not the bucket owner's upload, not bob's.
    for (const [key, id] of [
      ['b.bin', aliceUpload],
      ['c.bin', bobUpload],
    ]) {
      expect(await answer(await anon.fetch('GET', `/dropbox/${key}?uploadId=${id}`)), key).to.equal('403 AccessDenied');
      expect(await answer(await anon.fetch('DELETE', `/dropbox/${key}?uploadId=${id}`)), key).to.equal('403 AccessDenied');
    }
    expect(await answer(await anon.fetch('DELETE', `/dropbox/a.bin?uploadId=${anonymousUpload}`))).to.equal(204);
    expect([...layer.uploads.keys()].sort()).to.deep.equal([aliceUpload, bobUpload].sort());
  });

  it('refused with AccessDenied where the bucket grants AllUsers no WRITE, has ACLs off, or public ACLs are ignored; nothing is created', async () => {
    const anon = await app(null);
    expect(await answer(await anon.fetch('POST', '/readonly/big.bin?uploads'))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('POST', '/enforced/big.bin?uploads'))).to.equal('403 AccessDenied');
    const blocked = await app(null, { platformBlocksPublic: true });
    expect(await answer(await blocked.fetch('POST', '/dropbox/big.bin?uploads'))).to.equal('403 AccessDenied');
    expect(layer.callsOf('createMultipart')).to.have.length(0);
    // An upload of the owner's in a bucket the caller may not write: no part, no completion, no listing, no abort.
    const uploadId = await uploadIdOf(await (await app('alice')).fetch('POST', '/readonly/big.bin?uploads'));
    expect(await answer(await anon.fetch('PUT', `/readonly/big.bin?partNumber=1&uploadId=${uploadId}`, { body: 'x' }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('POST', `/readonly/big.bin?uploadId=${uploadId}`, { body: complete('"x"') }))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('GET', `/readonly/big.bin?uploadId=${uploadId}`))).to.equal('403 AccessDenied');
    expect(await answer(await anon.fetch('DELETE', `/readonly/big.bin?uploadId=${uploadId}`))).to.equal('403 AccessDenied');
    expect(layer.callsOf('uploadPart')).to.have.length(0);
    // An upload begun anonymously cannot be continued anonymously once public ACLs are ignored.
    const anonymousUpload = await uploadIdOf(await anon.fetch('POST', '/dropbox/late.bin?uploads'));
    expect(await answer(await blocked.fetch('PUT', `/dropbox/late.bin?partNumber=1&uploadId=${anonymousUpload}`, { body: 'x' }))).to.equal('403 AccessDenied');
    expect(await answer(await blocked.fetch('GET', `/dropbox/late.bin?uploadId=${anonymousUpload}`))).to.equal('403 AccessDenied');
    // UploadPartCopy needs a readable source and stays refused to anonymous callers.
    const copy = await anon.fetch('PUT', `/dropbox/late.bin?partNumber=1&uploadId=${anonymousUpload}`, { headers: { 'x-amz-copy-source': '/dropbox/x' } });
    expect(await answer(copy)).to.equal('403 AccessDenied');
  });
});
