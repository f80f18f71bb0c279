import {
  ChecksumAlgorithm,
  CopyObjectCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { chunkedPut, crc32 } from './support/checksums.js';
import { bodyBytes, describeWithBucket, presignedFetch, s3ErrorOf, s3Failure } from './support/s3.js';

describeWithBucket('e2e: stored checksums (x-amz-checksum-mode, GetObjectAttributes, listings)', 'sumkeep', (env, bucket) => {
  const headWith = (key: string) => env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));

  it('a checksum sent as a header is stored: HEAD and GET answer it when asked (the SDK then checks the bytes against it), not otherwise', async () => {
    const body = randomBytes(40_000);
    const put = await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'header.bin', Body: body, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }));
    expect([put.ChecksumCRC32, put.ChecksumType]).to.deep.equal([crc32(body), 'FULL_OBJECT']);
    const h = await headWith('header.bin');
    expect([h.ChecksumCRC32, h.ChecksumType]).to.deep.equal([crc32(body), 'FULL_OBJECT']);
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'header.bin' }))).ChecksumCRC32).to.equal(undefined);
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'header.bin', ChecksumMode: 'ENABLED' }));
    expect(got.ChecksumCRC32).to.equal(crc32(body));
    expect((await bodyBytes(got)).equals(body)).to.equal(true);
  });

  it('a checksum sent as a trailer (a streamed upload) is stored as well, whatever the algorithm', async () => {
    const body = randomBytes(70_000);
    const sha256 = createHash('sha256').update(body).digest('base64');
    await env.s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'streamed.bin',
        Body: Readable.from([body.subarray(0, 30_000), body.subarray(30_000)]),
        ContentLength: body.length,
        ChecksumAlgorithm: ChecksumAlgorithm.SHA256,
      }),
    );
    expect((await headWith('streamed.bin')).ChecksumSHA256).to.equal(sha256);
    // A raw aws-chunked PUT with its trailer: the value stored is the trailer's.
    const pieces = [Buffer.from('raw '), Buffer.from('trailer')];
    const r = await chunkedPut(env.p.endpoint, `/${bucket}/raw.txt`, pieces, `x-amz-checksum-crc32:${crc32(Buffer.concat(pieces))}\r\n`);
    expect(r.status, r.body).to.equal(200);
    expect((await headWith('raw.txt')).ChecksumCRC32).to.equal(crc32(Buffer.concat(pieces)));
  });

  it('a range read gets no checksum (its bytes are not the object); an upload without one and its overwrite keep none', async () => {
    const body = randomBytes(10_000);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'ranged.bin', Body: body, ChecksumAlgorithm: ChecksumAlgorithm.CRC32C }));
    const part = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'ranged.bin', Range: 'bytes=0-99', ChecksumMode: 'ENABLED' }));
    expect(part.ChecksumCRC32C).to.equal(undefined);
    expect((await bodyBytes(part)).equals(body.subarray(0, 100))).to.equal(true);

    expect((await presignedFetch(env.p.endpoint, 'PUT', `/${bucket}/ranged.bin`, { body: 'no checksum' })).status).to.equal(200);
    const h = await headWith('ranged.bin');
    expect([h.ChecksumCRC32, h.ChecksumCRC32C, h.ChecksumType]).to.deep.equal([undefined, undefined, undefined]);
  });

  it('GetObjectAttributes and ListObjectsV2 name the checksum; a copy keeps it, with either metadata directive', async () => {
    const body = Buffer.from('attributes body');
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'attrs/a.txt', Body: body, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }));
    const attrs = await env.s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: 'attrs/a.txt', ObjectAttributes: ['Checksum', 'ObjectSize'] }));
    expect(attrs.Checksum).to.deep.include({ ChecksumCRC32: crc32(body), ChecksumType: 'FULL_OBJECT' });
    expect(attrs.ObjectSize).to.equal(body.length);

    await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'attrs/copy.txt', CopySource: `${bucket}/attrs/a.txt` }));
    await env.s3.send(
      new CopyObjectCommand({
        Bucket: bucket,
        Key: 'attrs/replaced.txt',
        CopySource: `${bucket}/attrs/a.txt`,
        MetadataDirective: 'REPLACE',
        ContentType: 'text/plain',
      }),
    );
    for (const key of ['attrs/copy.txt', 'attrs/replaced.txt']) expect((await headWith(key)).ChecksumCRC32, key).to.equal(crc32(body));

    expect((await presignedFetch(env.p.endpoint, 'PUT', `/${bucket}/attrs/plain.txt`, { body: 'plain' })).status).to.equal(200);
    const listed = await env.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'attrs/' }));
    expect((listed.Contents ?? []).map((o) => [o.Key, o.ChecksumAlgorithm, o.ChecksumType])).to.deep.equal([
      ['attrs/a.txt', ['CRC32'], 'FULL_OBJECT'],
      ['attrs/copy.txt', ['CRC32'], 'FULL_OBJECT'],
      ['attrs/plain.txt', undefined, undefined],
      ['attrs/replaced.txt', ['CRC32'], 'FULL_OBJECT'],
    ]);
  });

  it('CopyObject with x-amz-checksum-algorithm gives the copy a checksum of that algorithm (computed from the bytes) and answers it', async () => {
    const body = randomBytes(300_000);
    const sha256 = createHash('sha256').update(body).digest('base64');
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'algo/source.bin', Body: body, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }));
    const copied = await env.s3.send(
      new CopyObjectCommand({ Bucket: bucket, Key: 'algo/sha.bin', CopySource: `${bucket}/algo/source.bin`, ChecksumAlgorithm: ChecksumAlgorithm.SHA256 }),
    );
    expect([copied.CopyObjectResult?.ChecksumSHA256, copied.CopyObjectResult?.ChecksumCRC32]).to.deep.equal([sha256, undefined]);
    const h = await headWith('algo/sha.bin');
    expect([h.ChecksumSHA256, h.ChecksumCRC32, h.ChecksumType]).to.deep.equal([sha256, undefined, 'FULL_OBJECT']);
    // The SDK checks the bytes it reads against the new checksum.
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'algo/sha.bin', ChecksumMode: 'ENABLED' })))).equals(body)).to.equal(
      true,
    );
    // The source keeps its own; the source's algorithm asked again, or none asked, keeps the source's value.
    expect((await headWith('algo/source.bin')).ChecksumCRC32).to.equal(crc32(body));
    const same = await env.s3.send(
      new CopyObjectCommand({ Bucket: bucket, Key: 'algo/crc.bin', CopySource: `${bucket}/algo/source.bin`, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
    );
    expect(same.CopyObjectResult?.ChecksumCRC32).to.equal(crc32(body));
    const plain = await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'algo/kept.bin', CopySource: `${bucket}/algo/source.bin` }));
    expect([plain.CopyObjectResult?.ChecksumCRC32, plain.CopyObjectResult?.ChecksumType]).to.deep.equal([crc32(body), 'FULL_OBJECT']);

    // A source without any checksum gets one computed; an unknown algorithm is InvalidRequest and copies nothing.
    expect((await presignedFetch(env.p.endpoint, 'PUT', `/${bucket}/algo/plain.bin`, { body })).status).to.equal(200);
    await env.s3.send(
      new CopyObjectCommand({ Bucket: bucket, Key: 'algo/from-plain.bin', CopySource: `${bucket}/algo/plain.bin`, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
    );
    expect((await headWith('algo/from-plain.bin')).ChecksumCRC32).to.equal(crc32(body));
    const copyHeaders = { 'x-amz-copy-source': `${bucket}/algo/source.bin`, 'x-amz-checksum-algorithm': 'MD5' };
    const refused = await presignedFetch(env.p.endpoint, 'PUT', `/${bucket}/algo/bad.bin`, { headers: copyHeaders });
    expect([refused.status, s3ErrorOf(await refused.text()).code]).to.deep.equal([400, 'InvalidRequest']);
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'algo/bad.bin' })))).status).to.equal(404);
  });
});
