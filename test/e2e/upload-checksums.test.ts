import {
  ChecksumAlgorithm,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { chunkedPut, crc32 } from './support/checksums.js';
import { bodyBytes, describeWithBucket, expectAbsent, presignedFetch, s3ErrorOf, s3Failure, sdkClient } from './support/s3.js';

describeWithBucket('e2e: flexible checksums (x-amz-checksum-*) on uploads', 'sums', (env, bucket) => {
  const get = async (key: string) => bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })));
  const absent = (key: string) => expectAbsent(env.s3, bucket, key);

  it("the SDK's default CRC32 (header for a buffer, trailer for a stream) is checked and echoed", async () => {
    const body = randomBytes(100_000);
    const put = await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'default.bin', Body: body }));
    expect(put.ChecksumCRC32).to.equal(crc32(body));
    expect((await get('default.bin')).equals(body)).to.equal(true);
    const streamed = await env.s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'streamed.bin',
        Body: Readable.from([body.subarray(0, 60_000), body.subarray(60_000)]),
        ContentLength: body.length,
      }),
    );
    expect(streamed.ChecksumCRC32).to.equal(crc32(body));
    expect((await get('streamed.bin')).equals(body)).to.equal(true);
  });

  it('every algorithm S3 offers is accepted and echoed: CRC32C, CRC64NVME, SHA1, SHA256', async () => {
    const body = randomBytes(5_000);
    const sha = (alg: string) => createHash(alg).update(body).digest('base64');
    const cases = [
      [ChecksumAlgorithm.CRC32C, 'ChecksumCRC32C', undefined],
      [ChecksumAlgorithm.CRC64NVME, 'ChecksumCRC64NVME', undefined],
      [ChecksumAlgorithm.SHA1, 'ChecksumSHA1', sha('sha1')],
      [ChecksumAlgorithm.SHA256, 'ChecksumSHA256', sha('sha256')],
    ] as const;
    for (const [algorithm, field, independent] of cases) {
      const sent: Record<string, string> = {};
      const client = sdkClient(env.p.endpoint);
      client.middlewareStack.add(
        (next) => async (args) => {
          Object.assign(sent, (args.request as { headers: Record<string, string> }).headers);
          return next(args);
        },
        { step: 'finalizeRequest', priority: 'low', name: 'capture' },
      );
      const put = await client.send(new PutObjectCommand({ Bucket: bucket, Key: `alg-${algorithm}`, Body: body, ChecksumAlgorithm: algorithm }));
      client.destroy();
      const header = `x-amz-checksum-${algorithm.toLowerCase()}`;
      expect(sent[header], algorithm).to.be.a('string');
      expect(put[field], algorithm).to.equal(sent[header]);
      if (independent) expect(put[field], algorithm).to.equal(independent);
      expect((await get(`alg-${algorithm}`)).equals(body), algorithm).to.equal(true);
    }
  });

  it('a wrong checksum is BadDigest: nothing stored, an existing object left as it was', async () => {
    const body = Buffer.from('the bytes the client meant to send');
    const wrong = crc32(Buffer.from('other bytes'));
    expect(await s3Failure(env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'wrong.txt', Body: body, ChecksumCRC32: wrong })))).to.deep.equal({
      name: 'BadDigest',
      status: 400,
    });
    await absent('wrong.txt');
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept.txt', Body: 'version one' }));
    const sha = createHash('sha256').update('x').digest('base64');
    expect(await s3Failure(env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept.txt', Body: 'version two', ChecksumSHA256: sha })))).to.deep.equal({
      name: 'BadDigest',
      status: 400,
    });
    expect((await get('kept.txt')).toString()).to.equal('version one');
  });

  it('trailers: a matching one stores the object, a wrong, missing or malformed one stores nothing', async () => {
    const pieces = [Buffer.from('hello '), Buffer.from('trailer')];
    const whole = Buffer.concat(pieces);
    const ok = await chunkedPut(env.p.endpoint, `/${bucket}/trailer-ok.txt`, pieces, `x-amz-checksum-crc32:${crc32(whole)}\r\n`);
    expect(ok.status, ok.body).to.equal(200);
    expect(ok.headers['x-amz-checksum-crc32']).to.equal(crc32(whole));
    expect((await get('trailer-ok.txt')).equals(whole)).to.equal(true);

    const refused: Array<[string, string, string]> = [
      ['trailer-wrong.txt', `x-amz-checksum-crc32:${crc32(Buffer.from('other'))}\r\n`, 'BadDigest'],
      ['trailer-missing.txt', '', 'MalformedTrailerError'],
      ['trailer-malformed.txt', 'x-amz-checksum-crc32:!!!!\r\n', 'InvalidRequest'],
    ];
    for (const [key, trailer, code] of refused) {
      const r = await chunkedPut(env.p.endpoint, `/${bucket}/${key}`, pieces, trailer);
      expect(r.status, key).to.equal(400);
      expect(s3ErrorOf(r.body).code, key).to.equal(code);
      await absent(key);
    }
  });

  it('checksum headers S3 refuses are InvalidRequest and store nothing', async () => {
    const body = Buffer.from('body');
    const cases: Array<Record<string, string>> = [
      { 'x-amz-checksum-crc32': crc32(body), 'x-amz-checksum-sha1': createHash('sha1').update(body).digest('base64') },
      { 'x-amz-checksum-crc32': 'AAAA' },
      { 'x-amz-sdk-checksum-algorithm': 'CRC32' },
      { 'x-amz-sdk-checksum-algorithm': 'MD4', 'x-amz-checksum-crc32': crc32(body) },
      { 'x-amz-trailer': 'x-amz-checksum-crc32' },
    ];
    for (const headers of cases) {
      const r = await presignedFetch(env.p.endpoint, 'PUT', `/${bucket}/refused.txt`, { headers, body });
      expect(r.status, JSON.stringify(headers)).to.equal(400);
      expect(s3ErrorOf(await r.text()).code, JSON.stringify(headers)).to.equal('InvalidRequest');
      await absent('refused.txt');
    }
  });

  it('multipart: parts are checked and echoed, a bad part is refused and not listed, the upload completes', async () => {
    const key = 'multi.bin';
    const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }));
    const part1 = randomBytes(5 * 1024 * 1024);
    const part2 = randomBytes(1000);
    const up1 = await env.s3.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: part1, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
    );
    expect(up1.ChecksumCRC32).to.equal(crc32(part1));
    const bad = await s3Failure(
      env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, Body: part2, ChecksumCRC32: crc32(part1) })),
    );
    expect(bad).to.deep.equal({ name: 'BadDigest', status: 400 });
    expect(((await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId }))).Parts ?? []).map((x) => x.PartNumber)).to.deep.equal([1]);
    const up2 = await env.s3.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, Body: part2, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
    );
    await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: [up1, up2].map((u, i) => ({ PartNumber: i + 1, ETag: u.ETag, ChecksumCRC32: u.ChecksumCRC32 })) },
      }),
    );
    expect((await get(key)).equals(Buffer.concat([part1, part2]))).to.equal(true);
  });

  it('DeleteObjects carries a checksum of its document (the SDK sends CRC32): a matching one deletes, a wrong one changes nothing', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'del.txt', Body: 'x' }));
    const client = sdkClient(env.p.endpoint);
    client.middlewareStack.add(
      (next) => async (args) => {
        const req = args.request as { headers: Record<string, string> };
        req.headers['x-amz-checksum-crc32'] = crc32(Buffer.from('not the document'));
        return next(args);
      },
      { step: 'build', priority: 'low', name: 'wrong-checksum' },
    );
    expect(await s3Failure(client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'del.txt' }] } })))).to.deep.equal({
      name: 'BadDigest',
      status: 400,
    });
    client.destroy();
    expect((await get('del.txt')).toString()).to.equal('x');
    const done = await env.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'del.txt' }] } }));
    expect((done.Deleted ?? []).map((d) => d.Key)).to.deep.equal(['del.txt']);
    await absent('del.txt');
  });
});
