import { DeleteBucketTaggingCommand, GetBucketTaggingCommand, PutBucketTaggingCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { awsCli } from './support/cli.js';
import { describeWithBucket, s3Failure, tenantClient } from './support/s3.js';

describeWithBucket('e2e: bucket tagging (Put/Get/DeleteBucketTagging)', 'tags', (env, bucket) => {
  const TagSet = [
    { Key: 'team', Value: 'data eng' },
    { Key: 'cost-centre', Value: '4711' },
  ];

  it('the SDK puts, reads back and deletes tags; none is NoSuchTagSet; bad tags are InvalidTag and change nothing', async () => {
    expect(await s3Failure(env.s3.send(new GetBucketTaggingCommand({ Bucket: bucket })))).to.deep.equal({ name: 'NoSuchTagSet', status: 404 });
    await env.s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet } }));
    expect((await env.s3.send(new GetBucketTaggingCommand({ Bucket: bucket }))).TagSet).to.deep.equal(TagSet);
    expect(
      await s3Failure(env.s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet: [{ Key: 'aws:owner', Value: 'x' }] } }))),
    ).to.deep.equal({ name: 'InvalidTag', status: 400 });
    expect((await env.s3.send(new GetBucketTaggingCommand({ Bucket: bucket }))).TagSet).to.deep.equal(TagSet);
    // An empty TagSet removes the tags, as DeleteBucketTagging does.
    await env.s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet: [] } }));
    expect((await s3Failure(env.s3.send(new GetBucketTaggingCommand({ Bucket: bucket })))).name).to.equal('NoSuchTagSet');
    await env.s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet } }));
    await env.s3.send(new DeleteBucketTaggingCommand({ Bucket: bucket }));
    expect((await s3Failure(env.s3.send(new GetBucketTaggingCommand({ Bucket: bucket })))).name).to.equal('NoSuchTagSet');
  });

  it("another tenant can neither read nor change a bucket's tags", async () => {
    await env.s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet } }));
    const mallory = await tenantClient(env.p.endpoint, 'tags-mallory');
    try {
      expect((await s3Failure(mallory.send(new GetBucketTaggingCommand({ Bucket: bucket })))).status).to.equal(403);
      expect((await s3Failure(mallory.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet: [] } })))).status).to.equal(403);
      expect((await s3Failure(mallory.send(new DeleteBucketTaggingCommand({ Bucket: bucket })))).status).to.equal(403);
    } finally {
      mallory.destroy();
    }
    expect((await env.s3.send(new GetBucketTaggingCommand({ Bucket: bucket }))).TagSet).to.deep.equal(TagSet);
  });

  it('aws s3api put-/get-bucket-tagging (Debian AWS CLI v2)', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'strata-e2e-tags-'));
    try {
      const aws = awsCli(env.p.endpoint, home);
      const put = await aws('s3api', 'put-bucket-tagging', '--bucket', bucket, '--tagging', JSON.stringify({ TagSet: [{ Key: 'from', Value: 'cli' }] }));
      expect(put.code, put.stderr).to.equal(0);
      const got = await aws('s3api', 'get-bucket-tagging', '--bucket', bucket);
      expect(got.code, got.stderr).to.equal(0);
      expect(JSON.parse(got.stdout)).to.deep.equal({ TagSet: [{ Key: 'from', Value: 'cli' }] });
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
