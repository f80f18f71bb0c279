import {
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { awsCli } from './support/cli.js';
import { bucketName, describeWithBucket, expectAbsent, rootPresign, s3ErrorOf, s3Failure } from './support/s3.js';

/**
 * What a write may ask for that Strata cannot give — another storage class, object lock, access for
 * others — is refused with nothing stored; what every object already is (STANDARD, private) is accepted.
 */
describeWithBucket('e2e: storage classes, object lock and public ACLs are refused, never silently dropped', 'props', (env, bucket) => {
  const absent = (key: string) => expectAbsent(env.s3, bucket, key);
  const put = (Key: string, extra: Partial<ConstructorParameters<typeof PutObjectCommand>[0]>) =>
    env.s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body: 'body', ...extra }));

  it('storage class: STANDARD (and reduced redundancy) are stored; any other is InvalidStorageClass and stores nothing', async () => {
    await put('standard.txt', { StorageClass: 'STANDARD' });
    await put('rrs.txt', { StorageClass: 'REDUCED_REDUNDANCY' });
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'rrs.txt' }))).ContentLength).to.equal(4);
    for (const StorageClass of ['GLACIER', 'STANDARD_IA', 'DEEP_ARCHIVE'] as const) {
      expect(await s3Failure(put(`cold-${StorageClass}`, { StorageClass })), StorageClass).to.deep.equal({ name: 'InvalidStorageClass', status: 400 });
      await absent(`cold-${StorageClass}`);
    }
    const url = rootPresign(env.p.endpoint, 'PUT', `/${bucket}/fast.txt`, { headers: { 'x-amz-storage-class': 'FAST' } });
    const r = await fetch(url, { method: 'PUT', headers: { 'x-amz-storage-class': 'FAST' }, body: 'x' });
    expect([r.status, s3ErrorOf(await r.text()).code]).to.deep.equal([400, 'InvalidStorageClass']);
    await absent('fast.txt');
  });

  it('object lock (retention or legal hold) is InvalidRequest on PutObject, CopyObject and CreateMultipartUpload; nothing is stored or started', async () => {
    const retain = new Date(Date.now() + 86_400_000);
    expect(await s3Failure(put('locked.txt', { ObjectLockMode: 'COMPLIANCE', ObjectLockRetainUntilDate: retain }))).to.deep.equal({
      name: 'InvalidRequest',
      status: 400,
    });
    expect(await s3Failure(put('held.txt', { ObjectLockLegalHoldStatus: 'ON' }))).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    await absent('locked.txt');
    await absent('held.txt');
    await put('source.txt', {});
    expect(
      await s3Failure(
        env.s3.send(
          new CopyObjectCommand({
            Bucket: bucket,
            Key: 'locked-copy.txt',
            CopySource: `${bucket}/source.txt`,
            ObjectLockMode: 'GOVERNANCE',
            ObjectLockRetainUntilDate: retain,
          }),
        ),
      ),
    ).to.deep.equal({
      name: 'InvalidRequest',
      status: 400,
    });
    await absent('locked-copy.txt');
    expect(
      await s3Failure(env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'locked.bin', ObjectLockLegalHoldStatus: 'ON' }))),
    ).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    expect((await env.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? []).to.deep.equal([]);
  });

  it('ACLs on a bucket with ACLs off (BucketOwnerEnforced, the default): private and bucket-owner-full-control are stored; others AccessControlListNotSupported, an unknown one InvalidArgument', async () => {
    await put('private.txt', { ACL: 'private' });
    await put('owner.txt', { ACL: 'bucket-owner-full-control' });
    for (const ACL of ['public-read', 'public-read-write', 'authenticated-read'] as const) {
      expect(await s3Failure(put(`public-${ACL}`, { ACL })), ACL).to.deep.equal({ name: 'AccessControlListNotSupported', status: 400 });
      await absent(`public-${ACL}`);
    }
    expect(await s3Failure(put('granted.txt', { GrantRead: 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' }))).to.deep.equal({
      name: 'AccessControlListNotSupported',
      status: 400,
    });
    await absent('granted.txt');
    const url = rootPresign(env.p.endpoint, 'PUT', `/${bucket}/odd-acl.txt`, { headers: { 'x-amz-acl': 'everyone' } });
    const r = await fetch(url, { method: 'PUT', headers: { 'x-amz-acl': 'everyone' }, body: 'x' });
    expect([r.status, s3ErrorOf(await r.text()).code]).to.deep.equal([400, 'InvalidArgument']);
    await absent('odd-acl.txt');
  });

  it('CreateBucket with object lock, or a public ACL while ACLs are off (the default), is refused and makes no bucket; with ACL private it is made', async () => {
    const locked = bucketName('props-lock');
    expect(await s3Failure(env.s3.send(new CreateBucketCommand({ Bucket: locked, ObjectLockEnabledForBucket: true })))).to.deep.equal({
      name: 'NotImplemented',
      status: 501,
    });
    expect((await s3Failure(env.s3.send(new HeadBucketCommand({ Bucket: locked })))).status).to.equal(404);
    const open = bucketName('props-public');
    expect(await s3Failure(env.s3.send(new CreateBucketCommand({ Bucket: open, ACL: 'public-read' })))).to.deep.equal({
      name: 'InvalidBucketAclWithObjectOwnership',
      status: 400,
    });
    expect((await s3Failure(env.s3.send(new HeadBucketCommand({ Bucket: open })))).status).to.equal(404);
    const privateBucket = bucketName('props-private');
    await env.s3.send(new CreateBucketCommand({ Bucket: privateBucket, ACL: 'private' }));
    await env.s3.send(new HeadBucketCommand({ Bucket: privateBucket }));
  });

  it('a form upload with acl=public-read (ACLs off here) or a storage class Strata lacks is refused and stores nothing; acl=private stores', async () => {
    const upload = async (key: string, fields: Record<string, string>) => {
      const post = await createPresignedPost(env.s3, { Bucket: bucket, Key: key, Expires: 300, Fields: fields });
      const form = new FormData();
      for (const [name, value] of Object.entries(post.fields)) form.append(name, value);
      form.append('file', new Blob(['form body']), 'f.txt');
      const r = await fetch(post.url, { method: 'POST', body: form });
      return [r.status, s3ErrorOf(await r.text()).code];
    };
    expect(await upload('form-public.txt', { acl: 'public-read' })).to.deep.equal([400, 'AccessControlListNotSupported']);
    await absent('form-public.txt');
    expect(await upload('form-cold.txt', { 'x-amz-storage-class': 'GLACIER' })).to.deep.equal([400, 'InvalidStorageClass']);
    await absent('form-cold.txt');
    expect((await upload('form-private.txt', { acl: 'private' }))[0]).to.equal(204);
  });

  it('the Debian AWS CLI v2: `s3 cp --storage-class GLACIER`, and `--acl public-read` into a bucket with ACLs off, fail and store nothing; STANDARD works', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'strata-props-'));
    try {
      const file = path.join(home, 'file.txt');
      await writeFile(file, 'some bytes');
      const aws = awsCli(env.p.endpoint, home);
      const cold = await aws('s3', 'cp', file, `s3://${bucket}/cli-cold.txt`, '--storage-class', 'GLACIER');
      expect([cold.code !== 0, cold.stderr.includes('InvalidStorageClass')], cold.stderr).to.deep.equal([true, true]);
      await absent('cli-cold.txt');
      const pub = await aws('s3', 'cp', file, `s3://${bucket}/cli-public.txt`, '--acl', 'public-read');
      expect([pub.code !== 0, pub.stderr.includes('AccessControlListNotSupported')], pub.stderr).to.deep.equal([true, true]);
      await absent('cli-public.txt');
      const ok = await aws('s3', 'cp', file, `s3://${bucket}/cli-standard.txt`, '--storage-class', 'STANDARD');
      expect(ok.code, ok.stderr).to.equal(0);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
