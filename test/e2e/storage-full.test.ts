import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { filesUnder } from '../support/temp-dir.js';
import { startTestPlatform, type TestPlatform } from './support/platform.js';
import { bodyBytes, completedParts, newBucket, s3Failure, sdkClient } from './support/s3.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;

/**
 * The filesystem backend's volume fills up (a 10 MiB tmpfs mounted as the platform's blob directory):
 * PutObject, UploadPart and CompleteMultipartUpload answer 507 InsufficientStorage, never 500, and leave
 * no partial file behind, and no breaker counts them; once space is freed, writes succeed again.
 */
describe('e2e: a full data volume answers 507 InsufficientStorage', function () {
  this.timeout(120_000);
  let dir: string;
  let blobs: string;
  let mounted = false;
  let p: TestPlatform | undefined;
  let s3: S3Client;

  before(async function () {
    dir = await mkdtemp(path.join(os.tmpdir(), 'strata-full-'));
    blobs = path.join(dir, 'blobs');
    await mkdir(blobs);
    try {
      await run('mount', ['-t', 'tmpfs', '-o', 'size=10m', 'tmpfs', blobs]);
      mounted = true;
    } catch {
      await rm(dir, { recursive: true, force: true });
      // Only root (or CAP_SYS_ADMIN) may mount; without it there is no real full filesystem to test on.
      this.skip();
    }
    // One counted failure would open the gateway's breakers: a full volume must not count.
    p = await startTestPlatform(dir, {
      gatewayRules: 'breakers:\n  default: { timeout: 10000, errorThresholdPercentage: 1, resetTimeout: 60000, volumeThreshold: 1 }\n',
    });
    s3 = sdkClient(p.endpoint);
  });
  after(async () => {
    s3?.destroy();
    await p?.stop();
    if (mounted) await run('umount', [blobs]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Temp files left under the blob directory (a write that failed must remove its own). */
  const tempFiles = async () => (await filesUnder(blobs)).filter((f) => f.endsWith('.tmp'));

  it('PutObject, UploadPart and Complete answer 507 with no partial file; writes work again once space is freed', async () => {
    const bucket = await newBucket(s3, 'full');
    const key = 'multi.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const part = (n: number, size: number) =>
      s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: n, Body: Buffer.alloc(size, n) }));
    // 6 MiB of the 10 in parts: composing them needs 6 MiB more.
    const parts = [await part(1, 5 * MiB), await part(2, 1 * MiB)];

    const complete = await s3Failure(
      s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: completedParts(parts) } })),
    );
    expect(complete).to.deep.equal({ name: 'InsufficientStorage', status: 507 });
    expect(await tempFiles()).to.deep.equal([]);

    const put = await s3Failure(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'big.bin', Body: Buffer.alloc(5 * MiB, 7) })));
    expect(put).to.deep.equal({ name: 'InsufficientStorage', status: 507 });
    expect(await tempFiles()).to.deep.equal([]);
    expect((await s3Failure(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'big.bin' })))).status).to.equal(404);

    const third = await s3Failure(part(3, 5 * MiB));
    expect(third).to.deep.equal({ name: 'InsufficientStorage', status: 507 });
    expect(await tempFiles()).to.deep.equal([]);

    // Space freed (the upload's parts go): the same PUT is stored and read back.
    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId }));
    const body = Buffer.alloc(5 * MiB, 7);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'big.bin', Body: body }));
    expect((await bodyBytes(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'big.bin' })))).equals(body)).to.equal(true);
    const metrics = await (await fetch(`${p!.endpoint}/metrics`)).text();
    expect(metrics).to.match(/strata_gateway_breaker_state\{[^}]*upstream="data-plane"[^}]*\} 0/);
  });
});
