import {
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  DeleteBucketEncryptionCommand,
  GetBucketEncryptionCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketEncryptionCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { awsCli } from './support/cli.js';
import { bodyBytes, describeWithBucket, expectAbsent, md5Hex, s3ErrorOf, s3Failure } from './support/s3.js';

describeWithBucket('e2e: server-side encryption (SSE-S3, SSE-C, bucket default)', 'sse', (env, bucket) => {
  const customerKey = randomBytes(32).toString('base64');
  const customerKeyMd5 = createHash('md5').update(Buffer.from(customerKey, 'base64')).digest('base64');
  const sseC = { SSECustomerAlgorithm: 'AES256', SSECustomerKey: customerKey };

  it('SSE-S3: PUT, GET and HEAD answer x-amz-server-side-encryption: AES256 and the MD5 ETag; the body reads back', async () => {
    const body = randomBytes(200_000);
    const put = await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 's3.bin', Body: body, ServerSideEncryption: 'AES256' }));
    expect(put.ServerSideEncryption).to.equal('AES256');
    expect(put.ETag).to.equal(`"${md5Hex(body)}"`);
    const head = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 's3.bin' }));
    expect(head.ServerSideEncryption).to.equal('AES256');
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 's3.bin', Range: 'bytes=65530-131080' }));
    expect(got.ServerSideEncryption).to.equal('AES256');
    expect((await bodyBytes(got)).equals(body.subarray(65530, 131081))).to.equal(true);
  });

  it('a copy of an object onto itself that only asks for encryption is a change (as S3), judged by the object layer', async () => {
    const body = randomBytes(1000);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'plain.bin', Body: body }));
    const copy = await env.s3.send(
      new CopyObjectCommand({ Bucket: bucket, Key: 'plain.bin', CopySource: `${bucket}/plain.bin`, ServerSideEncryption: 'AES256' }),
    );
    expect(copy.ServerSideEncryption).to.equal('AES256');
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'plain.bin' }));
    expect([got.ServerSideEncryption, (await bodyBytes(got)).equals(body)]).to.deep.equal(['AES256', true]);
    // Without any change it is still refused.
    const same = await s3Failure(env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'plain.bin', CopySource: `${bucket}/plain.bin` })));
    expect(same).to.deep.equal({ name: 'InvalidRequest', status: 400 });
  });

  it('SSE-C: GET and HEAD without the key are 400, with another key 403; with it the body and the key MD5 come back', async () => {
    const body = randomBytes(5000);
    const put = await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'c.bin', Body: body, ...sseC }));
    expect(put.SSECustomerKeyMD5).to.equal(customerKeyMd5);
    expect(await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.bin' })))).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'c.bin' })))).status).to.equal(400);
    const other = { SSECustomerAlgorithm: 'AES256', SSECustomerKey: randomBytes(32).toString('base64') };
    expect(await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.bin', ...other })))).to.deep.equal({ name: 'AccessDenied', status: 403 });
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.bin', ...sseC }));
    expect(got.SSECustomerKeyMD5).to.equal(customerKeyMd5);
    expect((await bodyBytes(got)).equals(body)).to.equal(true);
    // A second read without the key is still refused (no answer kept by the gateway serves it).
    expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.bin' })))).status).to.equal(400);
  });

  it('SSE-C: GetObjectAttributes needs the key as HEAD does: without it 400, with another 403, with it the attributes', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'c-attrs.bin', Body: randomBytes(700), ...sseC }));
    const ask = { Bucket: bucket, Key: 'c-attrs.bin', ObjectAttributes: ['ObjectSize' as const] };
    expect(await s3Failure(env.s3.send(new GetObjectAttributesCommand(ask)))).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    const other = { SSECustomerAlgorithm: 'AES256', SSECustomerKey: randomBytes(32).toString('base64') };
    expect(await s3Failure(env.s3.send(new GetObjectAttributesCommand({ ...ask, ...other })))).to.deep.equal({ name: 'AccessDenied', status: 403 });
    expect((await env.s3.send(new GetObjectAttributesCommand({ ...ask, ...sseC }))).ObjectSize).to.equal(700);
  });

  it('CopyObject with x-amz-copy-source-server-side-encryption-customer-* re-encrypts; multipart SSE-C needs the key on each part', async () => {
    const body = randomBytes(3000);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'copy-src.bin', Body: body, ...sseC }));
    expect(
      (await s3Failure(env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy-dst.bin', CopySource: `${bucket}/copy-src.bin` })))).status,
    ).to.equal(400);
    const copied = await env.s3.send(
      new CopyObjectCommand({
        Bucket: bucket,
        Key: 'copy-dst.bin',
        CopySource: `${bucket}/copy-src.bin`,
        CopySourceSSECustomerAlgorithm: 'AES256',
        CopySourceSSECustomerKey: customerKey,
        ServerSideEncryption: 'AES256',
      }),
    );
    expect(copied.ServerSideEncryption).to.equal('AES256');
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'copy-dst.bin' })))).equals(body)).to.equal(true);

    const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mp.bin', ...sseC }));
    const parts = [randomBytes(5 * 1024 * 1024), randomBytes(1000)];
    const etags: string[] = [];
    for (const [i, part] of parts.entries()) {
      const r = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mp.bin', UploadId, PartNumber: i + 1, Body: part, ...sseC }));
      etags.push(r.ETag!);
    }
    const done = await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: 'mp.bin',
        UploadId,
        MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) },
      }),
    );
    expect(done.ETag).to.match(/-2"$/);
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'mp.bin', ...sseC }));
    expect((await bodyBytes(got)).equals(Buffer.concat(parts))).to.equal(true);
  });

  it('bucket default encryption: Get of none is 404, Put/Get round trip, new objects get it, Delete removes it', async () => {
    expect(await s3Failure(env.s3.send(new GetBucketEncryptionCommand({ Bucket: bucket })))).to.deep.equal({
      name: 'ServerSideEncryptionConfigurationNotFoundError',
      status: 404,
    });
    await env.s3.send(
      new PutBucketEncryptionCommand({
        Bucket: bucket,
        ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      }),
    );
    const conf = await env.s3.send(new GetBucketEncryptionCommand({ Bucket: bucket }));
    expect(conf.ServerSideEncryptionConfiguration?.Rules?.[0]?.ApplyServerSideEncryptionByDefault?.SSEAlgorithm).to.equal('AES256');
    // (The gateway and data plane keep bucket records for up to 2 s.)
    await new Promise((r) => setTimeout(r, 2100));
    const put = await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'default.txt', Body: 'by default' }));
    expect(put.ServerSideEncryption).to.equal('AES256');
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'default.txt' }))).ServerSideEncryption).to.equal('AES256');
    await env.s3.send(new DeleteBucketEncryptionCommand({ Bucket: bucket }));
    expect((await s3Failure(env.s3.send(new GetBucketEncryptionCommand({ Bucket: bucket })))).status).to.equal(404);
  });

  it('a form upload with an x-amz-server-side-encryption field is stored encrypted, as a PUT with the header; aws:kms:dsse is 501 and stores nothing', async () => {
    const submit = async (key: string, sse: string) => {
      const post = await createPresignedPost(env.s3, { Bucket: bucket, Key: key, Expires: 300, Fields: { 'x-amz-server-side-encryption': sse } });
      const form = new FormData();
      for (const [name, value] of Object.entries(post.fields)) form.append(name, value);
      form.append('file', new Blob(['form body']), 'f.txt');
      return fetch(post.url, { method: 'POST', body: form });
    };
    const stored = await submit('form.txt', 'AES256');
    expect([stored.status, stored.headers.get('x-amz-server-side-encryption')]).to.deep.equal([204, 'AES256']);
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'form.txt' }))).ServerSideEncryption).to.equal('AES256');
    const dsse = await submit('form-dsse.txt', 'aws:kms:dsse');
    expect([dsse.status, s3ErrorOf(await dsse.text()).code]).to.deep.equal([501, 'NotImplemented']);
    await expectAbsent(env.s3, bucket, 'form-dsse.txt');
  });

  it('the Debian AWS CLI v2: `s3 cp --sse AES256` and `--sse-c` round trips', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'strata-sse-'));
    try {
      const aws = awsCli(env.p.endpoint, home);
      const file = path.join(home, 'secret.txt');
      await writeFile(file, 'meant to be encrypted');
      const back = path.join(home, 'back.txt');
      expect((await aws('s3', 'cp', file, `s3://${bucket}/cli.txt`, '--sse', 'AES256')).code).to.equal(0);
      expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'cli.txt' }))).ServerSideEncryption).to.equal('AES256');
      const raw = Buffer.from(customerKey, 'base64');
      const keyFile = path.join(home, 'key.bin');
      await writeFile(keyFile, raw);
      const up = await aws('s3', 'cp', file, `s3://${bucket}/cli-c.txt`, '--sse-c', 'AES256', '--sse-c-key', `fileb://${keyFile}`);
      expect(up.code, up.stderr).to.equal(0);
      expect((await aws('s3', 'cp', `s3://${bucket}/cli-c.txt`, back)).code).to.not.equal(0);
      const down = await aws('s3', 'cp', `s3://${bucket}/cli-c.txt`, back, '--sse-c', 'AES256', '--sse-c-key', `fileb://${keyFile}`);
      expect(down.code, down.stderr).to.equal(0);
      expect(await readFile(back, 'utf8')).to.equal('meant to be encrypted');
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
