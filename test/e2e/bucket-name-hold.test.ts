import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { startGateway } from '../../images/gateway/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { JWT_SECRET, ROOT_USER, startTestPlatform, type TestPlatform } from './support/platform.js';
import { bodyBytes, bucketName, createTenant, s3Failure, sdkClient } from './support/s3.js';

const INTERNAL_TOKEN = 'bucket-name-hold-internal-token';

/**
 * Gateways (and data planes) resolve bucket names to owners from short-lived caches, so with several
 * replicas a bucket deleted through one may still be known to another as its old owner's. If another
 * account could take the name at once, that replica would let the old owner into the new bucket.
 * The control plane holds a deleted name for its last owner (OperationAborted for anyone else) for
 * longer than those caches live.
 */
describe('e2e: a deleted bucket name is held for its owner across gateway replicas', function () {
  this.timeout(120_000);
  let p: TestPlatform;
  let replica: RunningService;
  let root: S3Client;
  let rootViaReplica: S3Client;
  let bob: S3Client;

  before(async () => {
    p = await startTestPlatform(undefined, { internalToken: INTERNAL_TOKEN });
    // A second gateway replica that keeps bucket records for ten minutes.
    replica = await startGateway({
      port: 0,
      host: '127.0.0.1',
      controlPlaneUrl: p.platform.urls['control-plane'],
      dataPlaneUrl: p.platform.urls['data-plane'],
      internalToken: INTERNAL_TOKEN,
      jwtSecret: JWT_SECRET,
      rootUser: ROOT_USER,
      bucketCacheMs: 600_000,
      logger: createLogger('replica', process.env.STRATA_E2E_LOG_LEVEL ?? 'silent'),
    });
    root = sdkClient(p.endpoint);
    rootViaReplica = sdkClient(replica.url);
    bob = (await createTenant(p.endpoint, 'bob')).s3;
  });
  after(async () => {
    for (const c of [root, rootViaReplica, bob]) c?.destroy();
    await replica?.stop();
    await p?.destroy();
  });

  it('refuses the name to another account while a replica may still resolve it to the old owner', async () => {
    const bucket = bucketName('held');
    await root.send(new CreateBucketCommand({ Bucket: bucket }));
    await root.send(new PutObjectCommand({ Bucket: bucket, Key: 'a.txt', Body: 'old owner' }));
    // The replica now holds the bucket record (owner: root) for ten minutes.
    expect((await bodyBytes(await rootViaReplica.send(new GetObjectCommand({ Bucket: bucket, Key: 'a.txt' })))).toString()).to.equal('old owner');
    await root.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'a.txt' }));
    await root.send(new DeleteBucketCommand({ Bucket: bucket }));

    expect(await s3Failure(bob.send(new CreateBucketCommand({ Bucket: bucket })))).to.deep.equal({ name: 'OperationAborted', status: 409 });
    expect((await s3Failure(bob.send(new HeadBucketCommand({ Bucket: bucket })))).status).to.equal(404);

    // Through the replica's stale record the old owner reaches nothing: no bucket to write into or list.
    expect(await s3Failure(rootViaReplica.send(new PutObjectCommand({ Bucket: bucket, Key: 'b.txt', Body: 'stale' })))).to.deep.equal({
      name: 'NoSuchBucket',
      status: 404,
    });
    expect(await s3Failure(rootViaReplica.send(new ListObjectsV2Command({ Bucket: bucket })))).to.deep.equal({ name: 'NoSuchBucket', status: 404 });

    // The old owner may take the name back at once, and then uses it through either gateway.
    await root.send(new CreateBucketCommand({ Bucket: bucket }));
    await rootViaReplica.send(new PutObjectCommand({ Bucket: bucket, Key: 'c.txt', Body: 'again' }));
    expect((await bodyBytes(await root.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.txt' })))).toString()).to.equal('again');
    expect((await root.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents?.map((o) => o.Key)).to.deep.equal(['c.txt']);
  });

  it('DeleteBucket ends the uploads in progress (as S3): the next bucket of the name never sees them', async () => {
    const bucket = bucketName('mpu-held');
    await root.send(new CreateBucketCommand({ Bucket: bucket }));
    const { UploadId } = await root.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin' }));
    const { ETag } = await root.send(new UploadPartCommand({ Bucket: bucket, Key: 'big.bin', UploadId, PartNumber: 1, Body: 'part one' }));
    // Uploads in progress do not keep a bucket.
    await root.send(new DeleteBucketCommand({ Bucket: bucket }));
    await root.send(new CreateBucketCommand({ Bucket: bucket }));
    expect((await root.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? []).to.deep.equal([]);
    expect(await s3Failure(root.send(new ListPartsCommand({ Bucket: bucket, Key: 'big.bin', UploadId })))).to.deep.equal({ name: 'NoSuchUpload', status: 404 });
    expect(
      await s3Failure(
        root.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] } })),
      ),
    ).to.deep.equal({ name: 'NoSuchUpload', status: 404 });
    expect((await root.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).to.deep.equal([]);
  });
});
