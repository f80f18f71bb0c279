import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { s3ClientFor, startRgw, startS3rver, type S3ServerHarness } from '../support/rgw.js';
import { rejectionOf } from '../support/rejection.js';

/** Bucket create, object put/get/list/delete: what the Strata backends need from an S3 server. */
async function roundTrip(client: S3Client): Promise<void> {
  const bucket = `strata-${randomUUID()}`;
  const body = `hello from Strata ${randomUUID()}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'dir/hello.txt', Body: body, ContentType: 'text/plain' }));
  const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'dir/hello.txt' }));
  expect(await got.Body!.transformToString()).to.equal(body);
  expect(got.ContentLength).to.equal(Buffer.byteLength(body));
  const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'dir/' }));
  expect(listed.Contents?.map((c) => c.Key)).to.deep.equal(['dir/hello.txt']);
  await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'dir/hello.txt' }));
  await client.send(new DeleteBucketCommand({ Bucket: bucket }));
}

describe('test harness: S3 server (radosgw, s3rver fallback)', function () {
  this.timeout(300_000);

  for (const [name, start] of [
    ['radosgw (or the fallback where Ceph is missing)', startRgw],
    ['s3rver fallback', () => startS3rver('chosen by the test')],
  ] as const) {
    it(`${name}: creates a bucket, puts and gets an object, then stops cleanly`, async () => {
      const h: S3ServerHarness = await start();
      const client = s3ClientFor(h);
      try {
        expect(h.endpoint).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
        await roundTrip(client);
        // Wrong credentials are refused: radosgw really checks signatures (s3rver does not).
        if (h.kind === 'radosgw') {
          const wrong = s3ClientFor({ ...h, secretKey: `${h.secretKey}x` });
          const error = await rejectionOf(roundTrip(wrong));
          wrong.destroy();
          expect((error as { name?: string })?.name).to.match(/SignatureDoesNotMatch|AccessDenied|InvalidAccessKeyId/);
        }
      } finally {
        client.destroy();
        await h.stop();
        await h.stop();
      }
      const afterStop = await fetch(h.endpoint).then(
        () => 'answered',
        () => 'refused',
      );
      expect(afterStop).to.equal('refused');
    });
  }
});
