import { CreateBucketCommand, HeadBucketCommand, ListBucketsCommand, S3ServiceException } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startTestPlatform, type TestPlatform } from './support/platform.js';
import { bucketName, sdkClient } from './support/s3.js';

describe('e2e: gateway flow control from a rules file', function () {
  this.timeout(60_000);
  let p: TestPlatform;
  let dir: string;

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'strata-e2e-rules-'));
    const rules = path.join(dir, 'rules.yaml');
    await writeFile(rules, 'rateLimits:\n  routes:\n    ListBuckets: { points: 2, duration: 60 }\n');
    p = await startTestPlatform(undefined, { gatewayRulesFile: rules });
  });
  after(async () => {
    await p?.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  it('a rate-limited S3 operation answers SlowDown (503, S3 XML, Retry-After) while others go on', async () => {
    const s3 = sdkClient(p.endpoint);
    const bucket = bucketName('flow');
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new ListBucketsCommand({}));
    await s3.send(new ListBucketsCommand({}));
    let refused: S3ServiceException | undefined;
    try {
      await s3.send(new ListBucketsCommand({}));
    } catch (err) {
      refused = err as S3ServiceException;
    }
    expect(refused?.name).to.equal('SlowDown');
    expect(refused?.$metadata.httpStatusCode).to.equal(503);
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
    s3.destroy();
  });
});
