import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketAclCommand,
  GetBucketLocationCommand,
  GetBucketVersioningCommand,
  GetObjectAclCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutBucketPolicyCommand,
  PutBucketVersioningCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  PutObjectLockConfigurationCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
  paginateListBuckets,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { ROOT_USER } from './support/platform.js';
import { bodyBytes, bucketName, completedParts, createTenant, describeWithBucket, md5Hex, s3Failure, sdkClient } from './support/s3.js';

describeWithBucket('e2e: @aws-sdk/client-s3 against the standalone gateway', 'sdk', (env, bucket) => {
  it('bucket calls: HeadBucket, location us-east-1, versioning never enabled, fixed private ACL', async () => {
    await env.s3.send(new HeadBucketCommand({ Bucket: bucket }));
    const loc = await env.s3.send(new GetBucketLocationCommand({ Bucket: bucket }));
    expect(loc.LocationConstraint ?? '').to.equal('');
    const v = await env.s3.send(new GetBucketVersioningCommand({ Bucket: bucket }));
    expect(v.Status).to.equal(undefined);
    const acl = await env.s3.send(new GetBucketAclCommand({ Bucket: bucket }));
    expect(acl.Grants?.[0]?.Permission).to.equal('FULL_CONTROL');
    expect(acl.Owner?.ID).to.equal('strata');
    // us-east-1: creating a bucket you already own succeeds (BucketAlreadyOwnedByYou only in other regions).
    expect((await env.s3.send(new CreateBucketCommand({ Bucket: bucket }))).$metadata.httpStatusCode).to.equal(200);
    expect((await s3Failure(env.s3.send(new HeadBucketCommand({ Bucket: bucketName('absent') })))).status).to.equal(404);
  });

  it('PutObject with metadata and Content-MD5, GetObject, HeadObject, response overrides', async () => {
    const body = Buffer.from('hello strata, with metadata');
    const put = await env.s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'meta/hello.txt',
        Body: body,
        ContentType: 'text/plain',
        Metadata: { colour: 'blue', 'x-y': 'z' },
        ContentMD5: createHash('md5').update(body).digest('base64'),
      }),
    );
    expect(put.ETag).to.equal(`"${md5Hex(body)}"`);
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'meta/hello.txt' }));
    expect((await bodyBytes(got)).equals(body)).to.equal(true);
    expect(got.ContentType).to.equal('text/plain');
    expect(got.Metadata).to.deep.equal({ colour: 'blue', 'x-y': 'z' });
    expect(got.ETag).to.equal(put.ETag);
    const head = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'meta/hello.txt' }));
    expect(head.ContentLength).to.equal(body.length);
    expect(head.Metadata?.colour).to.equal('blue');
    const overridden = await env.s3.send(
      new GetObjectCommand({
        Bucket: bucket,
        Key: 'meta/hello.txt',
        ResponseContentType: 'application/x-strata',
        ResponseContentDisposition: 'attachment; filename="h.txt"',
      }),
    );
    await bodyBytes(overridden);
    expect(overridden.ContentType).to.equal('application/x-strata');
    expect(overridden.ContentDisposition).to.equal('attachment; filename="h.txt"');
    const acl = await env.s3.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'meta/hello.txt' }));
    expect(acl.Grants?.[0]?.Permission).to.equal('FULL_CONTROL');
  });

  it('a streamed body goes up aws-chunked (STREAMING-UNSIGNED-PAYLOAD-TRAILER) and comes back whole', async () => {
    const data = randomBytes(300_000);
    const seen: string[] = [];
    const client = sdkClient(env.p.endpoint);
    client.middlewareStack.add(
      (next) => async (args) => {
        seen.push(String((args.request as { headers: Record<string, string> }).headers['x-amz-content-sha256']));
        return next(args);
      },
      { step: 'finalizeRequest', priority: 'low', name: 'observe' },
    );
    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'streamed.bin',
        Body: Readable.from([data.subarray(0, 100_000), data.subarray(100_000)]),
        ContentLength: data.length,
      }),
    );
    client.destroy();
    expect(seen[0]).to.match(/^STREAMING-/);
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'streamed.bin' }));
    expect((await bodyBytes(got)).equals(data)).to.equal(true);
  });

  it('range GET (206) and conditional GET (304 / 412)', async () => {
    const body = Buffer.from('0123456789abcdefghij');
    const put = await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'range.txt', Body: body }));
    const part = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=5-9' }));
    expect((await bodyBytes(part)).toString()).to.equal('56789');
    expect(part.ContentRange).to.equal(`bytes 5-9/${body.length}`);
    expect(part.$metadata.httpStatusCode).to.equal(206);
    const tail = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=-3' }));
    expect((await bodyBytes(tail)).toString()).to.equal('hij');
    expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=100-200' })))).status).to.equal(416);

    expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', IfNoneMatch: put.ETag })))).status).to.equal(304);
    expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', IfMatch: '"0000"' })))).status).to.equal(412);
    const future = new Date(Date.now() + 3600_000);
    const past = new Date(Date.now() - 3600_000);
    expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', IfModifiedSince: future })))).status).to.equal(304);
    expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', IfUnmodifiedSince: past })))).status).to.equal(412);
    const matched = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', IfMatch: put.ETag, IfModifiedSince: past }));
    expect((await bodyBytes(matched)).equals(body)).to.equal(true);
  });

  it('CopyObject with COPY and REPLACE metadata, copy-source conditions, copy to itself refused', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'copy/src.txt', Body: 'copy me', ContentType: 'text/plain', Metadata: { origin: 'src' } }));
    const copied = await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy/dst one.txt', CopySource: `${bucket}/copy/src.txt` }));
    expect(copied.CopyObjectResult?.ETag).to.equal(`"${md5Hex('copy me')}"`);
    const dst = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copy/dst one.txt' }));
    expect(dst.Metadata?.origin).to.equal('src');
    expect(dst.ContentType).to.equal('text/plain');
    await env.s3.send(
      new CopyObjectCommand({
        Bucket: bucket,
        Key: 'copy/replaced.txt',
        CopySource: `${bucket}/copy/src.txt`,
        MetadataDirective: 'REPLACE',
        Metadata: { origin: 'new' },
        ContentType: 'text/x-new',
      }),
    );
    const replaced = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copy/replaced.txt' }));
    expect(replaced.Metadata).to.deep.equal({ origin: 'new' });
    expect(replaced.ContentType).to.equal('text/x-new');
    const cond = await s3Failure(
      env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy/never.txt', CopySource: `${bucket}/copy/src.txt`, CopySourceIfMatch: '"nope"' })),
    );
    expect(cond.status).to.equal(412);
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copy/never.txt' })))).status).to.equal(404);
    const self = await s3Failure(env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy/src.txt', CopySource: `${bucket}/copy/src.txt` })));
    expect(self.name).to.equal('InvalidRequest');
    const missing = await s3Failure(env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy/x.txt', CopySource: `${bucket}/copy/absent.txt` })));
    expect(missing.name).to.equal('NoSuchKey');
  });

  it('multipart: create, upload parts, upload part copy with a range, list parts and uploads, complete, abort', async () => {
    const partA = randomBytes(5 * 1024 * 1024);
    const source = randomBytes(6 * 1024 * 1024);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'mp/source.bin', Body: source }));
    const { UploadId } = await env.s3.send(
      new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mp/joined.bin', ContentType: 'application/x-joined', Metadata: { kind: 'joined' } }),
    );
    expect(UploadId).to.be.a('string');
    const listed = await env.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    expect(listed.Uploads?.map((u) => u.UploadId)).to.include(UploadId);
    const p1 = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mp/joined.bin', UploadId, PartNumber: 1, Body: partA }));
    const range = 'bytes=1048576-2097151';
    const p2 = await env.s3.send(
      new UploadPartCopyCommand({
        Bucket: bucket,
        Key: 'mp/joined.bin',
        UploadId,
        PartNumber: 2,
        CopySource: `${bucket}/mp/source.bin`,
        CopySourceRange: range,
      }),
    );
    const parts = await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: 'mp/joined.bin', UploadId }));
    expect(parts.Parts?.map((x) => [x.PartNumber, x.Size])).to.deep.equal([
      [1, partA.length],
      [2, 1048576],
    ]);
    const done = await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: 'mp/joined.bin',
        UploadId,
        MultipartUpload: {
          Parts: completedParts([p1, p2.CopyPartResult]),
        },
      }),
    );
    expect(done.ETag).to.match(/^"[0-9a-f]{32}-2"$/);
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'mp/joined.bin' }));
    const bytes = await bodyBytes(got);
    expect(bytes.equals(Buffer.concat([partA, source.subarray(1048576, 2097152)]))).to.equal(true);
    expect(got.ContentType).to.equal('application/x-joined');
    expect(got.Metadata?.kind).to.equal('joined');
    const after = await env.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    expect(after.Uploads ?? []).to.have.length(0);

    const { UploadId: abortId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mp/aborted.bin' }));
    await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mp/aborted.bin', UploadId: abortId, PartNumber: 1, Body: 'tiny' }));
    await env.s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'mp/aborted.bin', UploadId: abortId }));
    expect((await s3Failure(env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: 'mp/aborted.bin', UploadId: abortId })))).name).to.equal('NoSuchUpload');
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'mp/aborted.bin' })))).status).to.equal(404);
  });

  it('ListMultipartUploads pages with markers and rolls keys up into CommonPrefixes by delimiter', async () => {
    const b = `${bucket}-uploads`;
    await env.s3.send(new CreateBucketCommand({ Bucket: b }));
    const keys = ['a/1', 'a/2', 'b/x/1', 'c', 'd e/1', 'd e/2'];
    const ids: Record<string, string> = {};
    for (const Key of keys) ids[Key] = (await env.s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key }))).UploadId!;
    ids['c#2'] = (await env.s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'c' }))).UploadId!;
    // Pages of two entries: a common prefix counts as one; the markers say where the next starts.
    const seen: string[] = [];
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    for (let i = 0; i < 10; i++) {
      const r = await env.s3.send(new ListMultipartUploadsCommand({ Bucket: b, Delimiter: '/', MaxUploads: 2, KeyMarker, UploadIdMarker }));
      expect((r.Uploads?.length ?? 0) + (r.CommonPrefixes?.length ?? 0)).to.be.at.most(2);
      seen.push(...(r.CommonPrefixes ?? []).map((p) => `prefix ${p.Prefix}`), ...(r.Uploads ?? []).map((u) => `upload ${u.Key}`));
      if (!r.IsTruncated) break;
      KeyMarker = r.NextKeyMarker;
      UploadIdMarker = r.NextUploadIdMarker || undefined;
    }
    expect(seen.sort()).to.deep.equal(['prefix a/', 'prefix b/', 'prefix d e/', 'upload c', 'upload c'].sort());
    const under = await env.s3.send(new ListMultipartUploadsCommand({ Bucket: b, Prefix: 'b/', Delimiter: '/' }));
    expect([(under.CommonPrefixes ?? []).map((p) => p.Prefix), under.Uploads ?? []]).to.deep.equal([['b/x/'], []]);
    const encoded = await env.s3.send(new ListMultipartUploadsCommand({ Bucket: b, Prefix: 'd e/', EncodingType: 'url' }));
    // URL-encoded in the answer (the SDK decodes only object listings' keys).
    expect([(encoded.Uploads ?? []).map((u) => u.Key), encoded.Prefix, encoded.EncodingType]).to.deep.equal([['d%20e/1', 'd%20e/2'], 'd%20e/', 'url']);
    const all = await env.s3.send(new ListMultipartUploadsCommand({ Bucket: b }));
    expect((all.Uploads ?? []).map((u) => u.UploadId).sort()).to.deep.equal(Object.values(ids).sort());
    for (const u of all.Uploads ?? []) await env.s3.send(new AbortMultipartUploadCommand({ Bucket: b, Key: u.Key, UploadId: u.UploadId }));
    await env.s3.send(new DeleteBucketCommand({ Bucket: b }));
  });

  it('ListObjectsV2 and v1 page through keys in byte order with prefixes and delimiters', async () => {
    const b = bucketName('list');
    await env.s3.send(new CreateBucketCommand({ Bucket: b }));
    const keys = ['a/1', 'a/2', 'a/b/3', 'B', 'c d/+4', 'z', 'é'];
    for (const Key of keys) await env.s3.send(new PutObjectCommand({ Bucket: b, Key, Body: Key }));
    const sorted = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));

    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await env.s3.send(new ListObjectsV2Command({ Bucket: b, MaxKeys: 2, ContinuationToken: token }));
      seen.push(...(page.Contents ?? []).map((o) => o.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
      pages++;
    } while (token);
    expect(seen).to.deep.equal(sorted);
    expect(pages).to.equal(4);

    const delim = await env.s3.send(new ListObjectsV2Command({ Bucket: b, Delimiter: '/', FetchOwner: true }));
    expect(delim.CommonPrefixes?.map((c) => c.Prefix)).to.deep.equal(['a/', 'c d/']);
    expect(delim.Contents?.map((o) => o.Key)).to.deep.equal(['B', 'z', 'é']);
    expect(delim.Contents?.[0].Owner?.ID).to.equal('strata');
    const inA = await env.s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: 'a/', Delimiter: '/' }));
    expect(inA.Contents?.map((o) => o.Key)).to.deep.equal(['a/1', 'a/2']);
    expect(inA.CommonPrefixes?.map((c) => c.Prefix)).to.deep.equal(['a/b/']);
    const startAfter = await env.s3.send(new ListObjectsV2Command({ Bucket: b, StartAfter: 'a/b/3' }));
    expect(startAfter.Contents?.map((o) => o.Key)).to.deep.equal(sorted.slice(sorted.indexOf('a/b/3') + 1));
    const encoded = await env.s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: 'c d/', EncodingType: 'url' }));
    expect(encoded.Contents?.map((o) => decodeURIComponent(o.Key!))).to.deep.equal(['c d/+4']);

    const v1: string[] = [];
    let marker: string | undefined;
    do {
      const page = await env.s3.send(new ListObjectsCommand({ Bucket: b, MaxKeys: 3, Marker: marker }));
      v1.push(...(page.Contents ?? []).map((o) => o.Key!));
      marker = page.IsTruncated ? (page.NextMarker ?? page.Contents?.at(-1)?.Key) : undefined;
    } while (marker);
    expect(v1).to.deep.equal(sorted);

    const versions = await env.s3.send(new ListObjectVersionsCommand({ Bucket: b, Prefix: 'a/' }));
    expect(versions.Versions?.map((v) => [v.Key, v.VersionId, v.IsLatest])).to.deep.equal([
      ['a/1', 'null', true],
      ['a/2', 'null', true],
      ['a/b/3', 'null', true],
    ]);
  });

  it('DeleteObject (204, idempotent) and DeleteObjects, quiet and verbose', async () => {
    for (const Key of ['d/1', 'd/2', 'd/3', 'd/4']) await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Key }));
    const one = await env.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'd/1' }));
    expect(one.$metadata.httpStatusCode).to.equal(204);
    await env.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'd/1' }));
    const verbose = await env.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'd/2' }, { Key: 'd/absent' }] } }));
    expect(verbose.Deleted?.map((d) => d.Key).sort()).to.deep.equal(['d/2', 'd/absent']);
    const quiet = await env.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'd/3' }, { Key: 'd/4' }], Quiet: true } }));
    expect(quiet.Deleted ?? []).to.have.length(0);
    expect(quiet.Errors ?? []).to.have.length(0);
    const left = await env.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'd/' }));
    expect(left.KeyCount).to.equal(0);
  });

  it('answers NotImplemented (501) for versioning, policies and object lock; a public ACL where ACLs are off is AccessControlListNotSupported', async () => {
    const attempts = [
      () => env.s3.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } })),
      () => env.s3.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy: '{"Version":"2012-10-17","Statement":[]}' })),
      () => env.s3.send(new PutObjectLockConfigurationCommand({ Bucket: bucket, ObjectLockConfiguration: { ObjectLockEnabled: 'Enabled' } })),
    ];
    for (const attempt of attempts) {
      const f = await s3Failure(attempt());
      expect(f).to.deep.equal({ name: 'NotImplemented', status: 501 });
    }
    expect(await s3Failure(env.s3.send(new PutObjectAclCommand({ Bucket: bucket, Key: 'meta/hello.txt', ACL: 'public-read' })))).to.deep.equal({
      name: 'AccessControlListNotSupported',
      status: 400,
    });
    // The bucket is unchanged and still usable.
    expect((await env.s3.send(new GetBucketVersioningCommand({ Bucket: bucket }))).Status).to.equal(undefined);
  });

  it('presigned GET and PUT URLs from the SDK presigner', async () => {
    const putUrl = await getSignedUrl(env.s3, new PutObjectCommand({ Bucket: bucket, Key: 'presigned/up.txt' }), { expiresIn: 300 });
    const up = await fetch(putUrl, { method: 'PUT', body: 'uploaded through a presigned URL' });
    expect(up.status).to.equal(200);
    const getUrl = await getSignedUrl(env.s3, new GetObjectCommand({ Bucket: bucket, Key: 'presigned/up.txt' }), { expiresIn: 300 });
    const down = await fetch(getUrl);
    expect(await down.text()).to.equal('uploaded through a presigned URL');
  });

  it('DeleteBucket refuses a non-empty bucket and removes an empty one', async () => {
    const b = bucketName('del');
    await env.s3.send(new CreateBucketCommand({ Bucket: b }));
    await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'k', Body: 'v' }));
    expect((await s3Failure(env.s3.send(new DeleteBucketCommand({ Bucket: b })))).name).to.equal('BucketNotEmpty');
    await env.s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k' }));
    await env.s3.send(new DeleteBucketCommand({ Bucket: b }));
    expect((await s3Failure(env.s3.send(new HeadBucketCommand({ Bucket: b })))).status).to.equal(404);
  });
  it('ListBuckets pages by name (max-buckets, continuation-token), filters by prefix and region, and refuses bad parameters', async () => {
    const pager = (await createTenant(env.p.endpoint, 'pager', 'pager-password')).s3;
    try {
      const names = ['pg-e', 'pg-a', 'pg-c', 'other-b', 'pg-d'].map((n) => `${n}-${env.bucket}`);
      for (const name of names) await pager.send(new CreateBucketCommand({ Bucket: name }));
      const pages: string[][] = [];
      for await (const page of paginateListBuckets({ client: pager, pageSize: 2 }, {})) pages.push((page.Buckets ?? []).map((b) => b.Name!));
      expect(pages).to.deep.equal([names.slice().sort().slice(0, 2), names.slice().sort().slice(2, 4), names.slice().sort().slice(4)]);
      const prefixed = await pager.send(new ListBucketsCommand({ Prefix: 'pg-', MaxBuckets: 3 }));
      expect((prefixed.Buckets ?? []).map((b) => b.Name)).to.deep.equal(
        names
          .filter((n) => n.startsWith('pg-'))
          .sort()
          .slice(0, 3),
      );
      expect(prefixed.Prefix).to.equal('pg-');
      expect(prefixed.ContinuationToken).to.be.a('string');
      const rest = await pager.send(new ListBucketsCommand({ Prefix: 'pg-', MaxBuckets: 3, ContinuationToken: prefixed.ContinuationToken }));
      expect((rest.Buckets ?? []).map((b) => b.Name)).to.deep.equal(
        names
          .filter((n) => n.startsWith('pg-'))
          .sort()
          .slice(3),
      );
      expect(rest.ContinuationToken).to.equal(undefined);
      expect((await pager.send(new ListBucketsCommand({}))).Buckets?.map((b) => [b.Name, b.BucketRegion])).to.deep.equal(
        names
          .slice()
          .sort()
          .map((n) => [n, 'us-east-1']),
      );
      expect((await pager.send(new ListBucketsCommand({ BucketRegion: 'eu-west-1' }))).Buckets ?? []).to.deep.equal([]);
      for (const bad of [{ MaxBuckets: 0 }, { MaxBuckets: 10_001 }, { ContinuationToken: 'not a token!' }]) {
        expect(await s3Failure(pager.send(new ListBucketsCommand(bad))), JSON.stringify(bad)).to.deep.equal({ name: 'InvalidArgument', status: 400 });
      }
    } finally {
      pager.destroy();
    }
  });
  it('CompleteMultipartUpload honours If-None-Match: * and If-Match (conditional writes): a failed condition leaves the upload in progress', async () => {
    const { bucket } = env;
    const key = 'conditional/multi.bin';
    const start = async () => {
      const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
      const part = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: 'only part' }));
      return { UploadId: UploadId!, Parts: [{ PartNumber: 1, ETag: part.ETag }] };
    };
    const complete = (u: { UploadId: string; Parts: Array<{ PartNumber: number; ETag?: string }> }, condition: { IfNoneMatch?: string; IfMatch?: string }) =>
      env.s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u.UploadId, MultipartUpload: { Parts: u.Parts }, ...condition }));
    // Absent key: If-None-Match: * completes.
    const first = await start();
    const created = await complete(first, { IfNoneMatch: '*' });
    // Present key: If-None-Match: * and a wrong If-Match are refused; the upload can still complete.
    const second = await start();
    expect(await s3Failure(complete(second, { IfNoneMatch: '*' }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(complete(second, { IfMatch: '"0123456789abcdef0123456789abcdef"' }))).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    expect(((await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId: second.UploadId }))).Parts ?? []).length).to.equal(1);
    const replaced = await complete(second, { IfMatch: created.ETag! });
    expect(replaced.ETag).to.match(/-1"$/);
    expect(await s3Failure(env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId: second.UploadId })))).to.deep.equal({
      name: 'NoSuchUpload',
      status: 404,
    });
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })))).toString()).to.equal('only part');
  });
  it("GetObjectAttributes answers ETag, size, storage class and a multipart object's part count, from metadata", async () => {
    const { bucket } = env;
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'attrs/single.txt', Body: 'twelve bytes' }));
    const single = await env.s3.send(
      new GetObjectAttributesCommand({ Bucket: bucket, Key: 'attrs/single.txt', ObjectAttributes: ['ETag', 'ObjectSize', 'StorageClass', 'ObjectParts'] }),
    );
    expect({ etag: single.ETag, size: single.ObjectSize, storage: single.StorageClass, parts: single.ObjectParts }).to.deep.equal({
      etag: md5Hex('twelve bytes'),
      size: 12,
      storage: 'STANDARD',
      parts: undefined,
    });
    expect(single.LastModified).to.be.instanceOf(Date);
    const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'attrs/multi.bin' }));
    const one = await env.s3.send(
      new UploadPartCommand({ Bucket: bucket, Key: 'attrs/multi.bin', UploadId, PartNumber: 1, Body: randomBytes(5 * 1024 * 1024) }),
    );
    const two = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'attrs/multi.bin', UploadId, PartNumber: 2, Body: 'tail' }));
    await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: 'attrs/multi.bin',
        UploadId,
        MultipartUpload: {
          Parts: completedParts([one, two]),
        },
      }),
    );
    const multi = await env.s3.send(
      new GetObjectAttributesCommand({ Bucket: bucket, Key: 'attrs/multi.bin', ObjectAttributes: ['ObjectParts', 'ObjectSize'] }),
    );
    expect({ parts: multi.ObjectParts?.TotalPartsCount, size: multi.ObjectSize, etag: multi.ETag }).to.deep.equal({
      parts: 2,
      size: 5 * 1024 * 1024 + 4,
      etag: undefined,
    });
    expect(await s3Failure(env.s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: 'attrs/absent', ObjectAttributes: ['ETag'] })))).to.deep.equal({
      name: 'NoSuchKey',
      status: 404,
    });
    expect(
      await s3Failure(env.s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: 'attrs/single.txt', ObjectAttributes: ['Colour' as 'ETag'] }))),
    ).to.deep.equal({ name: 'InvalidArgument', status: 400 });
  });
  it('x-amz-expected-bucket-owner (and the copy source one) must name the caller, the owner of every bucket it reaches', async () => {
    const { bucket } = env;
    await env.s3.send(new HeadBucketCommand({ Bucket: bucket, ExpectedBucketOwner: ROOT_USER }));
    // A HEAD answer has no body: only its status.
    expect((await s3Failure(env.s3.send(new HeadBucketCommand({ Bucket: bucket, ExpectedBucketOwner: 'someone-else' })))).status).to.equal(403);
    expect(
      await s3Failure(env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'owner/x.txt', Body: 'x', ExpectedBucketOwner: 'someone-else' }))),
    ).to.deep.equal({ name: 'AccessDenied', status: 403 });
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'owner/x.txt' })))).status).to.equal(404);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'owner/x.txt', Body: 'x', ExpectedBucketOwner: ROOT_USER }));
    expect(
      await s3Failure(
        env.s3.send(
          new CopyObjectCommand({ Bucket: bucket, Key: 'owner/y.txt', CopySource: `${bucket}/owner/x.txt`, ExpectedSourceBucketOwner: 'someone-else' }),
        ),
      ),
    ).to.deep.equal({ name: 'AccessDenied', status: 403 });
    await env.s3.send(
      new CopyObjectCommand({
        Bucket: bucket,
        Key: 'owner/y.txt',
        CopySource: `${bucket}/owner/x.txt`,
        ExpectedSourceBucketOwner: ROOT_USER,
        ExpectedBucketOwner: ROOT_USER,
      }),
    );
  });
});
