import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectTaggingCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  PutBucketLifecycleConfigurationCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  UploadPartCommand,
  type Tag,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { awsCli } from './support/cli.js';
import { describeWithBucket, login, newBucket, s3Failure, tenantClient } from './support/s3.js';

describeWithBucket(
  'e2e: object tagging (x-amz-tagging, Put/Get/DeleteObjectTagging)',
  'otags',
  (env, bucket) => {
    const tagsOf = async (key: string, b = bucket): Promise<Tag[]> => (await env.s3.send(new GetObjectTaggingCommand({ Bucket: b, Key: key }))).TagSet ?? [];
    const tagCount = async (key: string): Promise<number | undefined> => {
      const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      await got.Body?.transformToByteArray();
      return got.TagCount;
    };

    it('PutObject keeps x-amz-tagging with the object; GET answers the count; PutObjectTagging replaces, DeleteObjectTagging removes, bytes and ETag untouched', async () => {
      const put = await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'report.csv', Body: 'a,b\n1,2\n', Tagging: 'team=data%20eng&stage=raw' }));
      expect(await tagsOf('report.csv')).to.deep.equal([
        { Key: 'team', Value: 'data eng' },
        { Key: 'stage', Value: 'raw' },
      ]);
      expect(await tagCount('report.csv')).to.equal(2);
      // HEAD carries the count as well.
      const head = await fetch(`${env.p.endpoint}/${bucket}/report.csv`, {
        method: 'HEAD',
        headers: { authorization: `Bearer ${await login(env.p.endpoint)}` },
        redirect: 'manual',
      });
      expect([head.status, head.headers.get('x-amz-tagging-count')]).to.deep.equal([200, '2']);

      await env.s3.send(new PutObjectTaggingCommand({ Bucket: bucket, Key: 'report.csv', Tagging: { TagSet: [{ Key: 'stage', Value: 'clean' }] } }));
      expect(await tagsOf('report.csv')).to.deep.equal([{ Key: 'stage', Value: 'clean' }]);
      // Read-after-write through the read caches: the GET just before was answered from them.
      expect(await tagCount('report.csv')).to.equal(1);
      const after = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'report.csv' }));
      expect([after.ETag, await after.Body?.transformToString()]).to.deep.equal([put.ETag, 'a,b\n1,2\n']);

      await env.s3.send(new DeleteObjectTaggingCommand({ Bucket: bucket, Key: 'report.csv' }));
      expect(await tagsOf('report.csv')).to.deep.equal([]);
      expect(await tagCount('report.csv')).to.equal(undefined);
    });

    it('keeps tags in any language through every hop (URL-encoded header, internal JSON headers, XML answer)', async () => {
      await env.s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: 'intl.txt',
          Body: 'x',
          Tagging: `${encodeURIComponent('city')}=${encodeURIComponent('東京')}&${encodeURIComponent('café')}=${encodeURIComponent('crème brûlée')}`,
        }),
      );
      expect(await tagsOf('intl.txt')).to.deep.equal([
        { Key: 'city', Value: '東京' },
        { Key: 'café', Value: 'crème brûlée' },
      ]);
      expect(await tagCount('intl.txt')).to.equal(2);
      await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'intl-copy.txt', CopySource: `${bucket}/intl.txt` }));
      expect(await tagsOf('intl-copy.txt')).to.deep.equal([
        { Key: 'city', Value: '東京' },
        { Key: 'café', Value: 'crème brûlée' },
      ]);
    });

    it('tags belong to a version: an overwrite brings its own or none', async () => {
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'v.txt', Body: 'one', Tagging: 'v=1' }));
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'v.txt', Body: 'two' }));
      expect(await tagsOf('v.txt')).to.deep.equal([]);
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'v.txt', Body: 'three', Tagging: 'v=3' }));
      expect(await tagsOf('v.txt')).to.deep.equal([{ Key: 'v', Value: '3' }]);
    });

    it('CopyObject keeps the source tags by default; x-amz-tagging-directive REPLACE takes the request tags (or none)', async () => {
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'src.txt', Body: 'source', Tagging: 'origin=src&n=1' }));
      await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy-kept.txt', CopySource: `${bucket}/src.txt`, Tagging: 'ignored=1' }));
      expect(await tagsOf('copy-kept.txt')).to.deep.equal([
        { Key: 'origin', Value: 'src' },
        { Key: 'n', Value: '1' },
      ]);
      await env.s3.send(
        new CopyObjectCommand({ Bucket: bucket, Key: 'copy-replaced.txt', CopySource: `${bucket}/src.txt`, TaggingDirective: 'REPLACE', Tagging: 'copy=yes' }),
      );
      expect(await tagsOf('copy-replaced.txt')).to.deep.equal([{ Key: 'copy', Value: 'yes' }]);
      await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy-none.txt', CopySource: `${bucket}/src.txt`, TaggingDirective: 'REPLACE' }));
      expect(await tagsOf('copy-none.txt')).to.deep.equal([]);
      const bad = await s3Failure(
        env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy-bad.txt', CopySource: `${bucket}/src.txt`, TaggingDirective: 'MERGE' as 'COPY' })),
      );
      expect(bad).to.deep.equal({ name: 'InvalidArgument', status: 400 });
      expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copy-bad.txt' })))).status).to.equal(404);
    });

    it('a multipart upload takes the tags of its CreateMultipartUpload', async () => {
      const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'parts.bin', Tagging: 'kind=multipart' }));
      const part = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'parts.bin', UploadId, PartNumber: 1, Body: Buffer.alloc(1024, 7) }));
      await env.s3.send(
        new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'parts.bin', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] } }),
      );
      expect(await tagsOf('parts.bin')).to.deep.equal([{ Key: 'kind', Value: 'multipart' }]);
    });

    it('refuses bad tags with InvalidTag and stores nothing; a missing key is NoSuchKey', async () => {
      for (const Tagging of ['aws%3Acreated=1', 'a=1&a=2', Array.from({ length: 11 }, (_, i) => `k${i}=v`).join('&')]) {
        expect(await s3Failure(env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'refused.txt', Body: 'x', Tagging }))), Tagging).to.deep.equal({
          name: 'InvalidTag',
          status: 400,
        });
      }
      expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'refused.txt' })))).status).to.equal(404);
      expect(await s3Failure(env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'refused.bin', Tagging: 'aws%3Ax=1' })))).to.deep.equal({
        name: 'InvalidTag',
        status: 400,
      });

      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept.txt', Body: 'x', Tagging: 'keep=me' }));
      const eleven = Array.from({ length: 11 }, (_, i) => ({ Key: `k${i}`, Value: 'v' }));
      expect(await s3Failure(env.s3.send(new PutObjectTaggingCommand({ Bucket: bucket, Key: 'kept.txt', Tagging: { TagSet: eleven } })))).to.deep.equal({
        name: 'InvalidTag',
        status: 400,
      });
      expect(await tagsOf('kept.txt')).to.deep.equal([{ Key: 'keep', Value: 'me' }]);

      expect(await s3Failure(env.s3.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: 'no-such.txt' })))).to.deep.equal({
        name: 'NoSuchKey',
        status: 404,
      });
      expect(
        await s3Failure(env.s3.send(new PutObjectTaggingCommand({ Bucket: bucket, Key: 'no-such.txt', Tagging: { TagSet: [{ Key: 'a', Value: 'b' }] } }))),
      ).to.deep.equal({ name: 'NoSuchKey', status: 404 });
      expect(await s3Failure(env.s3.send(new DeleteObjectTaggingCommand({ Bucket: bucket, Key: 'no-such.txt' })))).to.deep.equal({
        name: 'NoSuchKey',
        status: 404,
      });
    });

    it("another tenant can neither read nor change an object's tags", async () => {
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'private.txt', Body: 'x', Tagging: 'secret=yes' }));
      const mallory = await tenantClient(env.p.endpoint, 'otags-mallory');
      try {
        expect((await s3Failure(mallory.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: 'private.txt' })))).status).to.equal(403);
        expect((await s3Failure(mallory.send(new PutObjectTaggingCommand({ Bucket: bucket, Key: 'private.txt', Tagging: { TagSet: [] } })))).status).to.equal(
          403,
        );
        expect((await s3Failure(mallory.send(new DeleteObjectTaggingCommand({ Bucket: bucket, Key: 'private.txt' })))).status).to.equal(403);
      } finally {
        mallory.destroy();
      }
      expect(await tagsOf('private.txt')).to.deep.equal([{ Key: 'secret', Value: 'yes' }]);
    });

    it('a lifecycle rule with a Tag filter selects the objects carrying that tag (x-amz-expiration)', async () => {
      const b = await newBucket(env.s3, 'otags-life');
      await env.s3.send(
        new PutBucketLifecycleConfigurationCommand({
          Bucket: b,
          LifecycleConfiguration: {
            Rules: [{ ID: 'scratch', Status: 'Enabled', Filter: { Tag: { Key: 'scratch', Value: 'true' } }, Expiration: { Days: 1 } }],
          },
        }),
      );
      const tagged = await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'tmp.txt', Body: 'x', Tagging: 'scratch=true' }));
      expect(tagged.Expiration).to.match(/rule-id="scratch"/);
      const plain = await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'keep.txt', Body: 'x', Tagging: 'scratch=false' }));
      expect(plain.Expiration).to.equal(undefined);
      expect((await env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'tmp.txt' }))).Expiration).to.match(/rule-id="scratch"/);
      expect((await env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'keep.txt' }))).Expiration).to.equal(undefined);
    });

    it('aws s3api put-/get-object-tagging, and aws s3 cp carries the tags of a 10 MiB object copied between buckets in parts (Debian AWS CLI v2)', async () => {
      const home = await mkdtemp(path.join(os.tmpdir(), 'strata-e2e-otags-'));
      try {
        const aws = awsCli(env.p.endpoint, home);
        const file = path.join(home, 'big.bin');
        await writeFile(file, Buffer.alloc(10 * 1024 * 1024, 3));
        const cp = await aws('s3', 'cp', file, `s3://${bucket}/big.bin`);
        expect(cp.code, cp.stderr).to.equal(0);
        const put = await aws(
          's3api',
          'put-object-tagging',
          '--bucket',
          bucket,
          '--key',
          'big.bin',
          '--tagging',
          JSON.stringify({ TagSet: [{ Key: 'from', Value: 'cli' }] }),
        );
        expect(put.code, put.stderr).to.equal(0);
        const got = await aws('s3api', 'get-object-tagging', '--bucket', bucket, '--key', 'big.bin');
        expect(got.code, got.stderr).to.equal(0);
        expect(JSON.parse(got.stdout).TagSet).to.deep.equal([{ Key: 'from', Value: 'cli' }]);
        const other = await newBucket(env.s3, 'otags-dest');
        const copy = await aws('s3', 'cp', `s3://${bucket}/big.bin`, `s3://${other}/big.bin`);
        expect(copy.code, copy.stderr).to.equal(0);
        expect(await tagsOf('big.bin', other)).to.deep.equal([{ Key: 'from', Value: 'cli' }]);
      } finally {
        await rm(home, { recursive: true, force: true });
      }
    });
  },
  180_000,
);
