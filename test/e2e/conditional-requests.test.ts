import {
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { bodyBytes, describeWithBucket, login, s3ErrorOf, s3Failure } from './support/s3.js';

/**
 * The conditions S3 puts on deletes and copies (conditional deletes, 2025; conditional copies): a
 * request that names a condition must never act when it fails, and must not ignore it.
 */
describeWithBucket('e2e: conditional deletes and copies', 'cond', (env, bucket) => {
  const put = (Key: string, Body = 'body') => env.s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body }));
  const exists = (Key: string) =>
    env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key })).then(
      () => true,
      () => false,
    );
  const text = async (Key: string) => (await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key })))).toString();
  const del = (Key: string, extra: Partial<ConstructorParameters<typeof DeleteObjectCommand>[0]> = {}) =>
    env.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key, ...extra }));
  const bearer = async (method: string, path: string, headers: Record<string, string>, body?: string) => {
    const r = await fetch(`${env.p.endpoint}${path}`, { method, headers: { authorization: `Bearer ${await login(env.p.endpoint)}`, ...headers }, body });
    return { status: r.status, ...s3ErrorOf(await r.text()) };
  };

  it('DeleteObject with If-Match deletes only the version it names; NoSuchKey when there is no object; a plain delete is unchanged', async () => {
    const { ETag } = await put('a.txt');
    expect(await s3Failure(del('a.txt', { IfMatch: '"0123456789abcdef0123456789abcdef"' }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect(await text('a.txt')).to.equal('body');
    await del('a.txt', { IfMatch: ETag });
    expect(await exists('a.txt')).to.equal(false);
    expect(await s3Failure(del('a.txt', { IfMatch: '*' }))).to.deep.equal({ name: 'NoSuchKey', status: 404 });
    await del('a.txt');
    await put('b.txt');
    await del('b.txt', { IfMatch: '*' });
    expect(await exists('b.txt')).to.equal(false);
  });

  it('DeleteObject with x-amz-if-match-size and -last-modified-time; bad values are InvalidArgument and delete nothing', async () => {
    await put('sized.txt', 'four');
    const { LastModified } = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'sized.txt' }));
    expect(await s3Failure(del('sized.txt', { IfMatchSize: 5 }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(del('sized.txt', { IfMatchLastModifiedTime: new Date(LastModified!.getTime() - 60_000) }))).to.deep.equal({
      name: 'PreconditionFailed',
      status: 412,
    });
    expect(await bearer('DELETE', `/${bucket}/sized.txt`, { 'x-amz-if-match-size': 'four' })).to.deep.include({ status: 400, code: 'InvalidArgument' });
    expect(await bearer('DELETE', `/${bucket}/sized.txt`, { 'x-amz-if-match-last-modified-time': 'yesterday' })).to.deep.include({
      status: 400,
      code: 'InvalidArgument',
    });
    expect(await text('sized.txt')).to.equal('four');
    await del('sized.txt', { IfMatchSize: 4, IfMatchLastModifiedTime: LastModified });
    expect(await exists('sized.txt')).to.equal(false);
  });

  it('DeleteObjects deletes an Object with an ETag or Size only when it matches, and reports the others', async () => {
    const one = await put('d/1');
    await put('d/2');
    await put('d/3', 'three');
    const r = await env.s3.send(
      new DeleteObjectsCommand({
        Bucket: bucket,
        Delete: {
          Objects: [
            { Key: 'd/1', ETag: one.ETag },
            { Key: 'd/2', ETag: '"0123456789abcdef0123456789abcdef"' },
            { Key: 'd/3', Size: 99 },
            { Key: 'd/none', ETag: '*' },
            { Key: 'd/plain-none' },
          ],
        },
      }),
    );
    expect((r.Deleted ?? []).map((d) => d.Key)).to.deep.equal(['d/1', 'd/plain-none']);
    expect((r.Errors ?? []).map((e) => [e.Key, e.Code])).to.deep.equal([
      ['d/2', 'PreconditionFailed'],
      ['d/3', 'PreconditionFailed'],
      ['d/none', 'NoSuchKey'],
    ]);
    expect([await exists('d/1'), await exists('d/2'), await exists('d/3')]).to.deep.equal([false, true, true]);
    // A bad Size refuses the whole request before anything is deleted.
    const bad = await bearer(
      'POST',
      `/${bucket}?delete`,
      {},
      '<Delete><Object><Key>d/2</Key></Object><Object><Key>d/3</Key><Size>big</Size></Object></Delete>',
    );
    expect(bad).to.deep.include({ status: 400, code: 'InvalidArgument' });
    expect([await exists('d/2'), await exists('d/3')]).to.deep.equal([true, true]);
  });

  it('CopyObject with If-None-Match: * never replaces an object and with If-Match only the version it names', async () => {
    await put('src.txt', 'source');
    const target = await put('dst.txt', 'target');
    const copy = (Key: string, extra: { IfMatch?: string; IfNoneMatch?: string }) =>
      env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key, CopySource: `${bucket}/src.txt`, ...extra }));
    expect(await s3Failure(copy('dst.txt', { IfNoneMatch: '*' }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(copy('dst.txt', { IfMatch: '"0123456789abcdef0123456789abcdef"' }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(copy('new.txt', { IfMatch: '*' }))).to.deep.equal({ name: 'NoSuchKey', status: 404 });
    expect(await text('dst.txt')).to.equal('target');
    expect(await exists('new.txt')).to.equal(false);
    await copy('new.txt', { IfNoneMatch: '*' });
    expect(await text('new.txt')).to.equal('source');
    await copy('dst.txt', { IfMatch: target.ETag });
    expect(await text('dst.txt')).to.equal('source');
  });

  it('UploadPartCopy honours x-amz-copy-source-if-*: a failed condition stores no part', async () => {
    const src = await put('part-src.bin', 'part source bytes');
    const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'assembled.bin' }));
    const copyPart = (PartNumber: number, extra: Partial<ConstructorParameters<typeof UploadPartCopyCommand>[0]>) =>
      env.s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: 'assembled.bin', UploadId, PartNumber, CopySource: `${bucket}/part-src.bin`, ...extra }));
    const past = new Date(Date.now() - 3_600_000);
    expect(await s3Failure(copyPart(1, { CopySourceIfMatch: '"0123456789abcdef0123456789abcdef"' }))).to.deep.equal({
      name: 'PreconditionFailed',
      status: 412,
    });
    expect(await s3Failure(copyPart(1, { CopySourceIfNoneMatch: src.ETag }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(copyPart(1, { CopySourceIfUnmodifiedSince: past }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect((await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: 'assembled.bin', UploadId }))).Parts ?? []).to.deep.equal([]);
    await copyPart(1, { CopySourceIfMatch: src.ETag, CopySourceIfModifiedSince: past });
    const parts = (await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: 'assembled.bin', UploadId }))).Parts ?? [];
    expect(parts.map((p) => [p.PartNumber, p.Size])).to.deep.equal([[1, 'part source bytes'.length]]);
  });
});
