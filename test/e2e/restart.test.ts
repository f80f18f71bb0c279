import { CreateBucketCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { startTestPlatform, type TestPlatform } from './support/platform.js';
import { bucketName, createTenant, login, sdkClient } from './support/s3.js';

describe('e2e: state survives a restart on the same data dir', function () {
  this.timeout(120_000);
  let first: TestPlatform | undefined;
  let second: TestPlatform | undefined;

  after(async () => {
    await first?.stop();
    await second?.stop();
    if (first) await rm(first.dataDir, { recursive: true, force: true });
  });

  it('put, stop, start again, get: objects, users and bearer tokens are still there', async () => {
    first = await startTestPlatform(undefined, { generatedJwtSecret: true });
    const bucket = bucketName('restart');
    const body = randomBytes(100_000);
    const s3 = sdkClient(first.endpoint);
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'persisted.bin', Body: body }));
    s3.destroy();
    const token = await login(first.endpoint);
    const carol = await createTenant(first.endpoint, 'carol', 'carol-password');
    carol.s3.destroy();
    await first.stop();

    second = await startTestPlatform(first.dataDir, { generatedJwtSecret: true });
    expect(second.endpoint).not.to.equal('');
    const again = sdkClient(second.endpoint);
    const got = await again.send(new GetObjectCommand({ Bucket: bucket, Key: 'persisted.bin' }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).to.equal(true);
    again.destroy();
    // The JWT secret is kept in the data dir: a token from before the restart still works.
    const listed = await fetch(`${second.endpoint}/${bucket}?list-type=2`, { headers: { authorization: `Bearer ${token}` } });
    expect(listed.status).to.equal(200);
    expect(await listed.text()).to.contain('<Key>persisted.bin</Key>');
    // Users' SigV4 secrets are sealed with a key kept in the data dir too.
    const carolS3 = sdkClient(second.endpoint, carol.accessKey, carol.secretKey);
    await carolS3.send(new CreateBucketCommand({ Bucket: bucketName('carol') }));
    carolS3.destroy();
  });
});
