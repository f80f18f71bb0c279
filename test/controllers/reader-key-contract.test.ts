import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { HttpReaderKeyService } from '../../controllers/image-index/source-reader.js';
import { eventually } from '../support/eventually.js';
import { startTestPlatform, type TestPlatform } from '../e2e/support/platform.js';
import { bodyText, s3Failure, sdkClient } from '../e2e/support/s3.js';

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

  it('makes one key per name (the same one each time), scoped as asked, and deletes it (twice is fine)', async () => {
    const key = await service.ensure('imageindex.ns.photos', 'strata', [{ bucket: 'reader-photos', prefix: 'img/' }]);
    expect(await service.ensure('imageindex.ns.photos', 'strata', [{ bucket: 'reader-photos', prefix: 'img/' }])).to.deep.equal(key);
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

  it('refuses a parent that is no user, and scopes that are not read-only bucket names', async () => {
    const put = (name: string, body: unknown) =>
      fetch(`${platform.platform.urls['control-plane']}/internal/scoped-keys/by-name/${name}`, {
        method: 'PUT',
        headers: { 'x-strata-internal-token': TOKEN, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await put('k1', { parent: 'nobody', buckets: ['reader-photos'] })).status).to.equal(400);
    expect((await put('k2', { parent: 'strata', access: 'write', buckets: ['reader-photos'] })).status).to.equal(400);
    expect((await put('k3', { parent: 'strata', buckets: ['Not_A_Bucket'] })).status).to.equal(400);
  });
});
