import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { aclHeaders, cannedGrants, S3Error, type Grant, type ListPartsResult, type ListUploadsResult, type Tag } from '../../images/object-model/src/index.js';
import { codeOf, handlerApp, type HandlerApp } from './handler-app.js';
import { FakeObjectLayer } from './fake-object-layer.js';

/** The fake layer with what these operations read: uploads' listings and parts, object tags. */
class UploadsLayer extends FakeObjectLayer {
  async listUploads(bucket: string): Promise<ListUploadsResult> {
    const uploads = [...this.uploads.entries()]
      .filter(([, u]) => u.bucket === bucket)
      .map(([uploadId, u]) => ({ key: u.key, uploadId, owner: u.owner, initiated: '2026-01-02T03:04:05.000Z' }));
    return { uploads, commonPrefixes: [], isTruncated: false };
  }

  async listParts(bucket: string, key: string, uploadId: string): Promise<ListPartsResult> {
    const u = this.uploads.get(uploadId);
    if (!u || u.bucket !== bucket || u.key !== key) throw new S3Error('NoSuchUpload', undefined, { UploadId: uploadId });
    return { parts: [], isTruncated: false, initiated: '2026-01-02T03:04:05.000Z', owner: u.owner };
  }

  async putObjectTags(bucket: string, key: string, tags: Tag[]): Promise<void> {
    const o = this.objects.get(`${bucket}/${key}`);
    if (!o) throw new S3Error('NoSuchKey', undefined, { Key: key });
    o.meta = { ...o.meta, tags };
  }
}

const grant = (id: string, permission: Grant['permission']): Grant => ({ grantee: { id }, permission });

/**
 * S3's mapping of ACL permissions to operations beyond GetObject and ListObjects (the AWS user guide's
 * "ACL permissions and access policy permissions" table and the operations' own permission notes):
 * READ on an object → GetObjectAttributes; READ on a bucket → ListMultipartUploads; object tagging and
 * ListParts are mapped from no ACL permission (the bucket owner's, and ListParts the upload initiator's too).
 */
describe('gateway handlers: which ACL grants allow GetObjectAttributes, object tagging, ListMultipartUploads, ListParts and AbortMultipartUpload', () => {
  let layer: UploadsLayer;
  const apps = new Map<string | null, HandlerApp>();
  const as = async (user: string | null): Promise<HandlerApp> => {
    if (!apps.has(user)) apps.set(user, await handlerApp(layer, user));
    return apps.get(user)!;
  };
  const answer = async (user: string | null, method: string, target: string, init: { headers?: Record<string, string>; body?: string } = {}) => {
    const r = await (await as(user)).fetch(method, target, init);
    const text = await r.text();
    return r.status < 300 ? r.status : `${r.status} ${method === 'HEAD' ? r.headers.get('x-amz-error-code') : codeOf(text)}`;
  };

  beforeEach(() => {
    layer = new UploadsLayer();
    // Alice's bucket, ACLs on (ObjectWriter): bob may list it (READ) and write to it (WRITE), carol write only.
    layer.addBucket('shared', 'alice');
    const shared = layer.buckets.get('shared')!;
    shared.ownership = [{ objectOwnership: 'ObjectWriter' }];
    shared.acl = [grant('alice', 'FULL_CONTROL'), grant('bob', 'READ'), grant('bob', 'WRITE'), grant('carol', 'WRITE')];
    // A public bucket (anonymous READ).
    layer.addBucket('open', 'alice');
    const open = layer.buckets.get('open')!;
    open.ownership = [{ objectOwnership: 'ObjectWriter' }];
    open.acl = cannedGrants('public-read', 'alice', 'alice');
    const withAcl = (grants: Grant[]) => ({ headers: aclHeaders({ owner: 'alice', grants }) });
    layer.store('shared', 'for-bob.txt', Buffer.from('bob may read'), withAcl([grant('alice', 'FULL_CONTROL'), grant('bob', 'READ')]));
    layer.store('shared', 'bob-full.txt', Buffer.from('bob has full control'), withAcl([grant('alice', 'FULL_CONTROL'), grant('bob', 'FULL_CONTROL')]));
    layer.store('shared', 'private.txt', Buffer.from('alice only'));
    layer.store('open', 'public.txt', Buffer.from('anyone'), withAcl(cannedGrants('public-read', 'alice', 'alice')));
    layer.store('open', 'private.txt', Buffer.from('alice only'));
  });
  afterEach(async () => {
    for (const app of apps.values()) await app.close();
    apps.clear();
  });

  const attributes = { headers: { 'x-amz-object-attributes': 'ETag,ObjectSize' } };

  it("GetObjectAttributes needs READ on the object, as GetObject: the object's READ grant (AllUsers: anonymous callers) allows it", async () => {
    expect(await answer('alice', 'GET', '/shared/private.txt?attributes', attributes)).to.equal(200);
    expect(await answer('bob', 'GET', '/shared/for-bob.txt?attributes', attributes)).to.equal(200);
    expect(await answer('bob', 'GET', '/shared/bob-full.txt?attributes', attributes)).to.equal(200);
    expect(await answer(null, 'GET', '/open/public.txt?attributes', attributes)).to.equal(200);
    expect(await answer('carol', 'GET', '/shared/for-bob.txt?attributes', attributes)).to.equal('403 AccessDenied');
    expect(await answer('bob', 'GET', '/shared/private.txt?attributes', attributes)).to.equal('403 AccessDenied');
    expect(await answer(null, 'GET', '/open/private.txt?attributes', attributes)).to.equal('403 AccessDenied');
    // A missing key is NoSuchKey only to who may list the bucket (S3: s3:ListBucket), AccessDenied to others.
    expect(await answer('bob', 'GET', '/shared/missing.txt?attributes', attributes)).to.equal('404 NoSuchKey');
    expect(await answer('carol', 'GET', '/shared/missing.txt?attributes', attributes)).to.equal('403 AccessDenied');
    const r = await (await as(null)).fetch('GET', '/open/public.txt?attributes', attributes);
    expect(await r.text()).to.contain('<ObjectSize>6</ObjectSize>');
  });

  it("object tagging is the bucket owner's: no grant (READ, WRITE, FULL_CONTROL on the object or the bucket) and no anonymous caller gets it", async () => {
    const tagging = '<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>';
    const md5 = { 'content-md5': createHash('md5').update(tagging).digest('base64') };
    expect(await answer('alice', 'PUT', '/shared/bob-full.txt?tagging', { headers: md5, body: tagging })).to.equal(200);
    expect(await answer('alice', 'GET', '/shared/bob-full.txt?tagging')).to.equal(200);
    for (const user of ['bob', 'carol']) {
      for (const key of ['for-bob.txt', 'bob-full.txt']) {
        expect(await answer(user, 'GET', `/shared/${key}?tagging`), `${user} ${key}`).to.equal('403 AccessDenied');
        expect(await answer(user, 'PUT', `/shared/${key}?tagging`, { headers: md5, body: tagging }), `${user} ${key}`).to.equal('403 AccessDenied');
        expect(await answer(user, 'DELETE', `/shared/${key}?tagging`), `${user} ${key}`).to.equal('403 AccessDenied');
      }
    }
    expect(await answer(null, 'GET', '/open/public.txt?tagging')).to.equal('403 AccessDenied');
    expect(await answer(null, 'PUT', '/open/public.txt?tagging', { headers: md5, body: tagging })).to.equal('403 AccessDenied');
    expect(layer.objects.get('shared/bob-full.txt')!.meta.tags).to.deep.equal([{ key: 'k', value: 'v' }]);
  });

  it('ListMultipartUploads needs READ on the bucket: a READ grantee and, on a public-read bucket, an anonymous caller list its uploads', async () => {
    await layer.createMultipart('shared', 'big.bin', { owner: 'carol' });
    await layer.createMultipart('open', 'big.bin', { owner: 'alice' });
    expect(await answer('alice', 'GET', '/shared?uploads')).to.equal(200);
    const listed = await (await as('bob')).fetch('GET', '/shared?uploads');
    expect([listed.status, (await listed.text()).includes('<Key>big.bin</Key>')]).to.deep.equal([200, true]);
    expect(await answer(null, 'GET', '/open?uploads')).to.equal(200);
    // WRITE alone is not READ.
    expect(await answer('carol', 'GET', '/shared?uploads')).to.equal('403 AccessDenied');
    expect(await answer(null, 'GET', '/shared?uploads')).to.equal('403 AccessDenied');
    expect(await answer('dave', 'GET', '/open?uploads')).to.equal(200);
  });

  it("ListParts is the bucket owner's and the upload initiator's: another WRITE grantee (or a READ one) may not list an upload's parts", async () => {
    const { uploadId } = await layer.createMultipart('shared', 'big.bin', { owner: 'bob' });
    expect(await answer('bob', 'GET', `/shared/big.bin?uploadId=${uploadId}`)).to.equal(200);
    expect(await answer('alice', 'GET', `/shared/big.bin?uploadId=${uploadId}`)).to.equal(200);
    expect(await answer('carol', 'GET', `/shared/big.bin?uploadId=${uploadId}`)).to.equal('403 AccessDenied');
    expect(await answer('dave', 'GET', `/shared/big.bin?uploadId=${uploadId}`)).to.equal('403 AccessDenied');
    // An upload that does not exist: NoSuchUpload to who could have started one here, AccessDenied to others.
    expect(await answer('carol', 'GET', '/shared/big.bin?uploadId=nope')).to.equal('404 NoSuchUpload');
    expect(await answer('alice', 'GET', '/shared/big.bin?uploadId=nope')).to.equal('404 NoSuchUpload');
    expect(await answer('dave', 'GET', '/shared/big.bin?uploadId=nope')).to.equal('403 AccessDenied');
    expect(await answer(null, 'GET', `/shared/big.bin?uploadId=${uploadId}`)).to.equal('403 AccessDenied');
  });

  it("AbortMultipartUpload is the bucket owner's and the upload initiator's too: another WRITE grantee may not end it", async () => {
    const { uploadId } = await layer.createMultipart('shared', 'big.bin', { owner: 'bob' });
    expect(await answer('carol', 'DELETE', `/shared/big.bin?uploadId=${uploadId}`)).to.equal('403 AccessDenied');
    expect(await answer('dave', 'DELETE', `/shared/big.bin?uploadId=${uploadId}`)).to.equal('403 AccessDenied');
    expect(layer.uploads.has(uploadId)).to.equal(true);
    expect(await answer('bob', 'DELETE', `/shared/big.bin?uploadId=${uploadId}`)).to.equal(204);
    const second = await layer.createMultipart('shared', 'big.bin', { owner: 'bob' });
    expect(await answer('alice', 'DELETE', `/shared/big.bin?uploadId=${second.uploadId}`)).to.equal(204);
    expect(layer.uploads.size).to.equal(0);
  });
});
