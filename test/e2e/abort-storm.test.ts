import { CreateBucketCommand, CreateMultipartUploadCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes, randomInt } from 'node:crypto';
import { createLogger, uncaughtErrors, surviveUncaughtErrors } from '../../images/service-kit/src/index.js';
import { abortUpload, overWorkers, seededRandom, type AbortedUpload } from '../support/abort-storm.js';
import { startTestPlatform, type TestPlatform } from './support/platform.js';
import { bodyBytes, bucketName, login, rootPresign, sdkClient } from './support/s3.js';

/** The counter's total over its labels. */
async function uncaughtCount(): Promise<number> {
  return (await uncaughtErrors.get()).values.reduce((sum, v) => sum + v.value, 0);
}

/**
 * Uploads that clients abandon mid-body (reset, close, half-close) at random byte offsets, on every
 * upload path (PUT of a small inline body, of a file-sized body, of a large declared body, UploadPart,
 * Bearer PUT): no error escapes its request, the process keeps serving, and nothing reaches the
 * last-resort handler.
 */
describe('e2e: aborted uploads never end the process', function () {
  this.timeout(600_000);
  let p: TestPlatform;
  let s3: S3Client;
  const bucket = bucketName('abort');
  const keep = randomBytes(300_000);

  before(async () => {
    surviveUncaughtErrors(createLogger('abort-storm-test', 'silent'));
    p = await startTestPlatform();
    s3 = sdkClient(p.endpoint);
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'keep.bin', Body: keep }));
  });
  after(async () => {
    s3?.destroy();
    await p?.destroy();
  });

  it('1000 uploads aborted at random byte offsets over 50 connections: the process stays up and a GET still answers', async () => {
    const seed = Number(process.env.STRATA_ABORT_SEED ?? randomInt(2 ** 31));
    console.log(`    abort storm seed ${seed} (STRATA_ABORT_SEED replays it)`);
    const random = seededRandom(seed);
    const before = await uncaughtCount();
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'parts.bin' }));
    const token = await login(p.endpoint);
    const signed = (path: string, extraQuery: Array<[string, string]> = []) =>
      new URL(rootPresign(p.endpoint, 'PUT', path, { expiresSeconds: 600, extraQuery }));
    const target = (u: URL) => `${u.pathname}${u.search}`;
    const uploads: Array<(i: number) => AbortedUpload> = [
      // 10 MB declared: the file path with the MD5 thread.
      (i) => ({ target: target(signed(`/${bucket}/big-${i}`)), headers: {}, contentLength: 10_000_000 }),
      // Small enough to be kept inline.
      (i) => ({ target: target(signed(`/${bucket}/inline-${i}`)), headers: {}, contentLength: 40_000 }),
      // Between inline and the FileSink buffer: a plain write stream.
      (i) => ({ target: target(signed(`/${bucket}/small-${i}`)), headers: {}, contentLength: 200_000 }),
      (i) => ({
        target: target(
          signed(`/${bucket}/parts.bin`, [
            ['partNumber', String((i % 10_000) + 1)],
            ['uploadId', UploadId!],
          ]),
        ),
        headers: {},
        contentLength: 6_000_000,
      }),
      (i) => ({ target: `/${bucket}/bearer-${i}`, headers: { authorization: `Bearer ${token}` }, contentLength: 3_000_000 }),
    ];
    const hows = ['reset', 'close', 'half-close'] as const;
    await overWorkers(1000, 50, async (i) => {
      const upload = uploads[Math.floor(random() * uploads.length)]!(i);
      const cutAt = Math.floor(random() * Math.min(upload.contentLength, 256 * 1024));
      await abortUpload(p.endpoint, upload, cutAt, hows[Math.floor(random() * hows.length)]!, Math.floor(random() * 50));
    });
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'keep.bin' }));
    expect((await bodyBytes(got)).equals(keep)).to.equal(true);
    expect(await uncaughtCount()).to.equal(before);
  });
});
