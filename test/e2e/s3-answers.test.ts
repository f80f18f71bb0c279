import {
  GetBucketEncryptionCommand,
  GetBucketLoggingCommand,
  GetBucketPolicyCommand,
  GetBucketRequestPaymentCommand,
  GetObjectLockConfigurationCommand,
  GetPublicAccessBlockCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { bodyBytes, describeWithBucket, presignedFetch, s3Failure } from './support/s3.js';

/** Answers as S3 gives them (issue #40), end to end with the AWS SDK. */
describeWithBucket('e2e: answers as S3 gives them', 'answers', (env, bucket) => {
  it('Non-ASCII user metadata is signed and stored as the SDK sends it, and answered RFC 2047 encoded as S3 answers it', async () => {
    // (Node's HTTP client sends only Latin-1 characters, one byte each, and the SDK signs their UTF-8.)
    const text = 'Grüße, café';
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'utf8-meta', Body: 'x', Metadata: { note: text, plain: 'ascii' } }));
    const encoded = `=?UTF-8?B?${Buffer.from(text).toString('base64')}?=`;
    const head = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'utf8-meta' }));
    expect(head.Metadata).to.deep.equal({ note: encoded, plain: 'ascii' });
    // An encoded word sent in is decoded before it is stored: the same answer again.
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'encoded-meta', Body: 'y', Metadata: { note: encoded } }));
    const get = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'encoded-meta' }));
    expect([get.Metadata, (await bodyBytes(get)).toString()]).to.deep.equal([{ note: encoded }, 'y']);
  });

  it('keys with control characters are stored, read and listed: as character references without encoding-type, URL-encoded with it', async () => {
    const key = 'ctl/line\nbreak\ttab\u0001bell';
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'ctl' }));
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })))).toString()).to.equal('ctl');
    const listed = await env.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'ctl/line\n', EncodingType: 'url' }));
    expect((listed.Contents ?? []).map((o) => decodeURIComponent(o.Key!))).to.deep.equal([key]);
    const raw = await (
      await presignedFetch(env.p.endpoint, 'GET', `/${bucket}`, {
        query: [
          ['list-type', '2'],
          ['prefix', 'ctl/'],
        ],
      })
    ).text();
    expect(raw).to.contain('<Key>ctl/line&#x0A;break&#x09;tab&#x01;bell</Key>');
  });

  it('the SDK reads unset bucket configurations as S3 answers them (Terraform reads them all)', async () => {
    const missing: Array<[string, () => Promise<unknown>]> = [
      ['NoSuchBucketPolicy', () => env.s3.send(new GetBucketPolicyCommand({ Bucket: bucket }))],
      ['ServerSideEncryptionConfigurationNotFoundError', () => env.s3.send(new GetBucketEncryptionCommand({ Bucket: bucket }))],
      ['ObjectLockConfigurationNotFoundError', () => env.s3.send(new GetObjectLockConfigurationCommand({ Bucket: bucket }))],
      ['NoSuchPublicAccessBlockConfiguration', () => env.s3.send(new GetPublicAccessBlockCommand({ Bucket: bucket }))],
    ];
    for (const [code, read] of missing) expect(await s3Failure(read()), code).to.deep.equal({ name: code, status: 404 });
    expect((await env.s3.send(new GetBucketLoggingCommand({ Bucket: bucket }))).LoggingEnabled).to.equal(undefined);
    expect((await env.s3.send(new GetBucketRequestPaymentCommand({ Bucket: bucket }))).Payer).to.equal('BucketOwner');
  });
});
