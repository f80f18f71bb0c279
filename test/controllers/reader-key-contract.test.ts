import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { HttpReaderKeyService, newReaderKey } from '../../controllers/image-index/source-reader.js';
import { eventually } from '../support/eventually.js';
import { startTestPlatform, type TestPlatform } from '../e2e/support/platform.js';
import { bodyText, createTenant, s3Failure, sdkClient } from '../e2e/support/s3.js';

const TOKEN = 'reader-contract-internal-token';

// The ImageIndex controller's client (source-reader.ts) against the real control plane's internal API,
// and the key it gets against the real gateway: what the fake-API-server tests stub.
describe('ImageIndex reader keys: the operator client against the real control plane and gateway', function () {
  this.timeout(120_000);
  let platform: TestPlatform;
  let service: HttpReaderKeyService;

  before(async () => {
    platform = await startTestPlatform(undefined, { internalToken: TOKEN });
    service = new HttpReaderKeyService({
      namespace: 'ns',
      controlPlaneUrl: platform.platform.urls['control-plane']!,
      rootUser: 'strata',
      internalToken: TOKEN,
    });
    const root = sdkClient(platform.endpoint);
    await root.send(new CreateBucketCommand({ Bucket: 'reader-photos' }));
    await root.send(new PutObjectCommand({ Bucket: 'reader-photos', Key: 'img/a.jpg', Body: 'a' }));
    await root.send(new PutObjectCommand({ Bucket: 'reader-photos', Key: 'other/b.jpg', Body: 'b' }));
    root.destroy();
  });
  after(() => platform?.destroy());

  it('makes the key pair it is given the key of that name (asking again changes nothing), scoped as asked, and deletes it (twice is fine)', async () => {
    const key = newReaderKey();
    await service.ensure('imageindex.ns.photos', 'strata', [{ bucket: 'reader-photos', prefix: 'img/' }], key);
    await service.ensure('imageindex.ns.photos', 'strata', [{ bucket: 'reader-photos', prefix: 'img/' }], key);
    const reader = sdkClient(platform.endpoint, key.accessKey, key.secretKey);
    try {
      expect(await bodyText(await reader.send(new GetObjectCommand({ Bucket: 'reader-photos', Key: 'img/a.jpg' })))).to.equal('a');
      expect((await reader.send(new ListObjectsV2Command({ Bucket: 'reader-photos', Prefix: 'img/' }))).KeyCount).to.equal(1);
      expect(await s3Failure(reader.send(new GetObjectCommand({ Bucket: 'reader-photos', Key: 'other/b.jpg' })))).to.deep.equal({
        name: 'AccessDenied',
        status: 403,
      });
      expect(await s3Failure(reader.send(new PutObjectCommand({ Bucket: 'reader-photos', Key: 'img/new.jpg', Body: 'x' })))).to.deep.equal({
        name: 'AccessDenied',
        status: 403,
      });
      await service.remove('imageindex.ns.photos');
      await service.remove('imageindex.ns.photos');
      await eventually(async () =>
        expect((await s3Failure(reader.send(new ListObjectsV2Command({ Bucket: 'reader-photos', Prefix: 'img/' })))).status).to.equal(403),
      );
    } finally {
      reader.destroy();
    }
  });

  it('replaces the key of a name given another key pair (a Secret made anew): the old one stops working', async () => {
    const first = newReaderKey();
    const second = newReaderKey();
    await service.ensure('imageindex.ns.again', 'strata', [{ bucket: 'reader-photos', prefix: '' }], first);
    await service.ensure('imageindex.ns.again', 'strata', [{ bucket: 'reader-photos', prefix: '' }], second);
    const [old, current] = [sdkClient(platform.endpoint, first.accessKey, first.secretKey), sdkClient(platform.endpoint, second.accessKey, second.secretKey)];
    try {
      expect((await current.send(new ListObjectsV2Command({ Bucket: 'reader-photos' }))).KeyCount).to.equal(2);
      await eventually(async () => expect((await s3Failure(old.send(new ListObjectsV2Command({ Bucket: 'reader-photos' })))).status).to.equal(403));
    } finally {
      old.destroy();
      current.destroy();
      await service.remove('imageindex.ns.again');
    }
  });

  it('refuses a parent that is no user, another parent for a name, a taken key id, and scopes that are not read-only bucket names', async () => {
    const put = (name: string, body: unknown) =>
      fetch(`${platform.platform.urls['control-plane']}/internal/scoped-keys/by-name/${name}`, {
        method: 'PUT',
        headers: { 'x-strata-internal-token': TOKEN, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const key = newReaderKey();
    expect((await put('k1', { parent: 'nobody', buckets: ['reader-photos'], ...key })).status).to.equal(400);
    expect((await put('k2', { parent: 'strata', access: 'write', buckets: ['reader-photos'], ...key })).status).to.equal(400);
    expect((await put('k3', { parent: 'strata', buckets: ['Not_A_Bucket'], ...key })).status).to.equal(400);
    expect((await put('k4', { parent: 'strata', buckets: ['reader-photos'], accessKey: 'short', secretKey: key.secretKey })).status).to.equal(400);
    expect((await put('k5', { parent: 'strata', buckets: ['reader-photos'], ...key })).status).to.equal(201);
    // The same key id under another name, or the root's own id: taken.
    expect((await put('k6', { parent: 'strata', buckets: ['reader-photos'], ...key })).status).to.equal(409);
    // The same name for another user's key: refused.
    (await createTenant(platform.endpoint, 'reader-bob')).s3.destroy();
    expect((await put('k5', { parent: 'reader-bob', buckets: ['reader-photos'], ...newReaderKey() })).status).to.equal(409);
  });
});
