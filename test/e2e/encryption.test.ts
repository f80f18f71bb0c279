import { CopyObjectCommand, CreateMultipartUploadCommand, GetObjectCommand, ListMultipartUploadsCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { awsCli } from './support/cli.js';
import { bodyBytes, describeWithBucket, expectAbsent, s3ErrorOf, s3Failure } from './support/s3.js';

describeWithBucket('e2e: server-side encryption is refused, never silently skipped', 'sse', (env, bucket) => {
  const absent = (key: string) => expectAbsent(env.s3, bucket, key);
  const customerKey = randomBytes(32).toString('base64');

  it('PutObject asking for SSE-S3, SSE-KMS or SSE-C is NotImplemented and stores nothing (a 1 MiB body still gets the answer)', async () => {
    const body = randomBytes(1024 * 1024);
    const asks = [
      { ServerSideEncryption: 'AES256' as const },
      { ServerSideEncryption: 'aws:kms' as const, SSEKMSKeyId: 'alias/strata' },
      { SSECustomerAlgorithm: 'AES256', SSECustomerKey: customerKey },
    ];
    for (const [i, ask] of asks.entries()) {
      expect(await s3Failure(env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: `sse-${i}`, Body: body, ...ask }))), JSON.stringify(ask)).to.deep.equal({
        name: 'NotImplemented',
        status: 501,
      });
      await absent(`sse-${i}`);
    }
  });

  it('CopyObject and CreateMultipartUpload asking for it are refused; the source is untouched and no upload starts', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'plain.txt', Body: 'plain' }));
    expect(
      await s3Failure(
        env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy.txt', CopySource: `${bucket}/plain.txt`, ServerSideEncryption: 'AES256' })),
      ),
    ).to.deep.equal({ name: 'NotImplemented', status: 501 });
    await absent('copy.txt');
    expect(
      await s3Failure(
        env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mpu.bin', SSECustomerAlgorithm: 'AES256', SSECustomerKey: customerKey })),
      ),
    ).to.deep.equal({ name: 'NotImplemented', status: 501 });
    expect((await env.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? []).to.deep.equal([]);
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'plain.txt' })))).toString()).to.equal('plain');
  });

  it('a read bringing a customer key (SSE-C) is InvalidRequest: the object was not encrypted with it', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'readable.txt', Body: 'x' }));
    expect(
      await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'readable.txt', SSECustomerAlgorithm: 'AES256', SSECustomerKey: customerKey }))),
    ).to.deep.equal({ name: 'InvalidRequest', status: 400 });
  });

  it('a form upload with an x-amz-server-side-encryption field is refused and stores nothing', async () => {
    const post = await createPresignedPost(env.s3, { Bucket: bucket, Key: 'form.txt', Expires: 300, Fields: { 'x-amz-server-side-encryption': 'AES256' } });
    const form = new FormData();
    for (const [name, value] of Object.entries(post.fields)) form.append(name, value);
    form.append('file', new Blob(['form body']), 'f.txt');
    const r = await fetch(post.url, { method: 'POST', body: form });
    expect([r.status, s3ErrorOf(await r.text()).code]).to.deep.equal([501, 'NotImplemented']);
    await absent('form.txt');
  });

  it('the Debian AWS CLI v2: `s3 cp --sse AES256` fails and stores nothing', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'strata-sse-'));
    try {
      const file = path.join(home, 'secret.txt');
      await writeFile(file, 'meant to be encrypted');
      const cp = await awsCli(env.p.endpoint, home)('s3', 'cp', file, `s3://${bucket}/cli.txt`, '--sse', 'AES256');
      expect(cp.code).to.not.equal(0);
      expect(cp.stderr).to.include('NotImplemented');
      await absent('cli.txt');
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
