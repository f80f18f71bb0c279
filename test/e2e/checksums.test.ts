import {
  ChecksumAlgorithm,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { Crc64Nvme } from '@aws-sdk/checksums/crc';
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { httpExchange, type HttpAnswer } from '../support/http.js';
import { ROOT_PASSWORD, ROOT_USER } from './support/platform.js';
import { bodyBytes, describeWithBucket, s3ErrorOf, s3Failure, sdkClient } from './support/s3.js';

const crc32 = (data: Buffer) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(zlib.crc32(data) >>> 0);
  return out.toString('base64');
};

/** A PUT of an aws-chunked body with an unsigned trailer, as SDKs send streams, through a presigned URL. */
function chunkedPut(endpoint: string, path: string, pieces: Buffer[], trailer: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  const framed = Buffer.concat([
    ...pieces.flatMap((p) => [Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]),
    Buffer.from(`0\r\n${trailer}\r\n`),
  ]);
  const decoded = pieces.reduce((n, p) => n + p.length, 0);
  const signed = { 'x-amz-decoded-content-length': String(decoded), 'x-amz-trailer': 'x-amz-checksum-crc32', ...headers };
  const url = new URL(
    presignUrl({
      method: 'PUT',
      origin: endpoint,
      path,
      accessKey: ROOT_USER,
      secret: ROOT_PASSWORD,
      region: 'us-east-1',
      expiresSeconds: 60,
      headers: signed,
    }),
  );
  return httpExchange(url, { method: 'PUT', headers: { 'content-encoding': 'aws-chunked', 'content-length': framed.length, ...signed } }, framed);
}

describeWithBucket('e2e: flexible checksums (x-amz-checksum-*) on uploads', 'sums', (env, bucket) => {
  const get = async (key: string) => bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })));
  const absent = async (key: string) => expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })))).status).to.equal(404);

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
      const url = presignUrl({
        method: 'PUT',
        origin: env.p.endpoint,
        path: `/${bucket}/refused.txt`,
        accessKey: ROOT_USER,
        secret: ROOT_PASSWORD,
        region: 'us-east-1',
        expiresSeconds: 60,
        headers,
      });
      const r = await fetch(url, { method: 'PUT', headers, body });
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
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: up1.ETag, ChecksumCRC32: up1.ChecksumCRC32 },
            { PartNumber: 2, ETag: up2.ETag, ChecksumCRC32: up2.ChecksumCRC32 },
          ],
        },
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

    const url = presignUrl({
      method: 'PUT',
      origin: env.p.endpoint,
      path: `/${bucket}/ranged.bin`,
      accessKey: ROOT_USER,
      secret: ROOT_PASSWORD,
      region: 'us-east-1',
      expiresSeconds: 60,
    });
    expect((await fetch(url, { method: 'PUT', body: 'no checksum' })).status).to.equal(200);
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

    const url = presignUrl({
      method: 'PUT',
      origin: env.p.endpoint,
      path: `/${bucket}/attrs/plain.txt`,
      accessKey: ROOT_USER,
      secret: ROOT_PASSWORD,
      region: 'us-east-1',
      expiresSeconds: 60,
    });
    expect((await fetch(url, { method: 'PUT', body: 'plain' })).status).to.equal(200);
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
    const url = presignUrl({
      method: 'PUT',
      origin: env.p.endpoint,
      path: `/${bucket}/algo/plain.bin`,
      accessKey: ROOT_USER,
      secret: ROOT_PASSWORD,
      region: 'us-east-1',
      expiresSeconds: 60,
    });
    expect((await fetch(url, { method: 'PUT', body })).status).to.equal(200);
    await env.s3.send(
      new CopyObjectCommand({ Bucket: bucket, Key: 'algo/from-plain.bin', CopySource: `${bucket}/algo/plain.bin`, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
    );
    expect((await headWith('algo/from-plain.bin')).ChecksumCRC32).to.equal(crc32(body));
    const copyHeaders = { 'x-amz-copy-source': `${bucket}/algo/source.bin`, 'x-amz-checksum-algorithm': 'MD5' };
    const bad = presignUrl({
      method: 'PUT',
      origin: env.p.endpoint,
      path: `/${bucket}/algo/bad.bin`,
      accessKey: ROOT_USER,
      secret: ROOT_PASSWORD,
      region: 'us-east-1',
      expiresSeconds: 60,
      headers: copyHeaders,
    });
    const refused = await fetch(bad, { method: 'PUT', headers: copyHeaders });
    expect([refused.status, s3ErrorOf(await refused.text()).code]).to.deep.equal([400, 'InvalidRequest']);
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'algo/bad.bin' })))).status).to.equal(404);
  });
});

describeWithBucket('e2e: multipart uploads with a checksum algorithm (COMPOSITE and FULL_OBJECT)', 'summpu', (env, bucket) => {
  const MiB = 1024 * 1024;
  const crc64 = async (data: Buffer) => {
    const d = new Crc64Nvme();
    d.update(data);
    return Buffer.from(await d.digest()).toString('base64');
  };
  const presignedPart = (key: string, uploadId: string, n: number) =>
    presignUrl({
      method: 'PUT',
      origin: env.p.endpoint,
      path: `/${bucket}/${key}`,
      accessKey: ROOT_USER,
      secret: ROOT_PASSWORD,
      region: 'us-east-1',
      expiresSeconds: 60,
      extraQuery: [
        ['partNumber', String(n)],
        ['uploadId', uploadId],
      ],
    });

  it('COMPOSITE (CRC32): parts keep their checksums (ListParts), the object gets the checksum of theirs with -N', async () => {
    const key = 'composite.bin';
    const created = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }));
    expect([created.ChecksumAlgorithm, created.ChecksumType]).to.deep.equal(['CRC32', 'COMPOSITE']);
    const UploadId = created.UploadId!;
    const parts = [randomBytes(5 * MiB), randomBytes(3000)];
    const uploaded = [];
    for (const [i, part] of parts.entries())
      uploaded.push(
        await env.s3.send(
          new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body: part, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
        ),
      );
    const listed = await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId }));
    expect((listed.Parts ?? []).map((p) => p.ChecksumCRC32)).to.deep.equal(parts.map(crc32));
    expect(listed.ChecksumAlgorithm).to.equal('CRC32');

    const done = await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: uploaded.map((u, i) => ({ PartNumber: i + 1, ETag: u.ETag, ChecksumCRC32: u.ChecksumCRC32 })) },
      }),
    );
    const composite = `${crc32(Buffer.concat(parts.map((p) => Buffer.from(crc32(p), 'base64'))))}-2`;
    expect([done.ChecksumCRC32, done.ChecksumType]).to.deep.equal([composite, 'COMPOSITE']);
    const head = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
    expect([head.ChecksumCRC32, head.ChecksumType]).to.deep.equal([composite, 'COMPOSITE']);
    // The SDK does not check a composite checksum against the bytes (it is not theirs); they are whole.
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
    expect((await bodyBytes(got)).equals(Buffer.concat(parts))).to.equal(true);
    const attrs = await env.s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: key, ObjectAttributes: ['Checksum', 'ObjectParts'] }));
    expect([attrs.Checksum?.ChecksumCRC32, attrs.Checksum?.ChecksumType, attrs.ObjectParts?.TotalPartsCount]).to.deep.equal([composite, 'COMPOSITE', 2]);
    // Its parts are listed with their sizes and checksums, a page at a time.
    expect(attrs.ObjectParts?.Parts?.map((p) => [p.PartNumber, p.Size, p.ChecksumCRC32])).to.deep.equal(parts.map((p, i) => [i + 1, p.length, crc32(p)]));
    const first = await env.s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: key, ObjectAttributes: ['ObjectParts'], MaxParts: 1 }));
    expect([first.ObjectParts?.Parts?.map((p) => p.PartNumber), first.ObjectParts?.IsTruncated, first.ObjectParts?.NextPartNumberMarker]).to.deep.equal([
      [1],
      true,
      '1',
    ]);
    const second = await env.s3.send(
      new GetObjectAttributesCommand({ Bucket: bucket, Key: key, ObjectAttributes: ['ObjectParts'], MaxParts: 1, PartNumberMarker: '1' }),
    );
    expect([second.ObjectParts?.Parts?.map((p) => p.PartNumber), second.ObjectParts?.IsTruncated]).to.deep.equal([[2], false]);
    // One part read by its number comes with that part's own checksum (the SDK checks the part's bytes against it).
    for (const [i, part] of parts.entries()) {
      const one = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, PartNumber: i + 1, ChecksumMode: 'ENABLED' }));
      expect([one.ChecksumCRC32, one.PartsCount]).to.deep.equal([crc32(part), 2]);
      expect((await bodyBytes(one)).equals(part)).to.equal(true);
    }
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, PartNumber: 2, ChecksumMode: 'ENABLED' }))).ChecksumCRC32).to.equal(
      crc32(parts[1]!),
    );
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, PartNumber: 2 }))).ChecksumCRC32, 'not asked for').to.equal(undefined);
    // A copy that asks for CRC32 gets the CRC32 of the bytes (FULL_OBJECT), not the composite one.
    const copied = await env.s3.send(
      new CopyObjectCommand({ Bucket: bucket, Key: 'composite-copy.bin', CopySource: `${bucket}/${key}`, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
    );
    expect([copied.CopyObjectResult?.ChecksumCRC32, copied.CopyObjectResult?.ChecksumType]).to.deep.equal([crc32(Buffer.concat(parts)), 'FULL_OBJECT']);
  });

  it('FULL_OBJECT (CRC64NVME): the CRC of the whole object from its parts, compared with the one sent on Complete; GET checks the bytes against it', async () => {
    const key = 'full.bin';
    const created = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: ChecksumAlgorithm.CRC64NVME }));
    expect([created.ChecksumAlgorithm, created.ChecksumType]).to.deep.equal(['CRC64NVME', 'FULL_OBJECT']);
    const UploadId = created.UploadId!;
    const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB + 17), randomBytes(1)];
    const whole = Buffer.concat(parts);
    const uploaded = [];
    for (const [i, part] of parts.entries())
      uploaded.push(
        await env.s3.send(
          new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body: part, ChecksumAlgorithm: ChecksumAlgorithm.CRC64NVME }),
        ),
      );
    const Parts = uploaded.map((u, i) => ({ PartNumber: i + 1, ETag: u.ETag, ChecksumCRC64NVME: u.ChecksumCRC64NVME }));

    // A whole-object checksum that is not the object's: BadDigest, and the upload is still there.
    const wrong = await s3Failure(
      env.s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: bucket,
          Key: key,
          UploadId,
          MultipartUpload: { Parts },
          ChecksumCRC64NVME: await crc64(parts[0]!),
          ChecksumType: 'FULL_OBJECT',
        }),
      ),
    );
    expect(wrong).to.deep.equal({ name: 'BadDigest', status: 400 });
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })))).status).to.equal(404);

    const done = await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts },
        ChecksumCRC64NVME: await crc64(whole),
        ChecksumType: 'FULL_OBJECT',
      }),
    );
    expect([done.ChecksumCRC64NVME, done.ChecksumType]).to.deep.equal([await crc64(whole), 'FULL_OBJECT']);
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
    expect(got.ChecksumCRC64NVME).to.equal(await crc64(whole));
    expect((await bodyBytes(got)).equals(whole)).to.equal(true);
  });

  it('FULL_OBJECT (CRC32) with UploadPartCopy: a copied range gets its checksum on the way', async () => {
    const source = randomBytes(6 * MiB);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'copy-source.bin', Body: source }));
    const key = 'copied.bin';
    const { UploadId } = await env.s3.send(
      new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: ChecksumAlgorithm.CRC32, ChecksumType: 'FULL_OBJECT' }),
    );
    const copied = await env.s3.send(
      new UploadPartCopyCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        PartNumber: 1,
        CopySource: `${bucket}/copy-source.bin`,
        CopySourceRange: `bytes=0-${5 * MiB - 1}`,
      }),
    );
    expect(copied.CopyPartResult?.ChecksumCRC32).to.equal(crc32(source.subarray(0, 5 * MiB)));
    const tail = Buffer.from('tail');
    const last = await env.s3.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, Body: tail, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
    );
    const done = await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: copied.CopyPartResult?.ETag },
            { PartNumber: 2, ETag: last.ETag },
          ],
        },
      }),
    );
    const whole = Buffer.concat([source.subarray(0, 5 * MiB), tail]);
    expect([done.ChecksumCRC32, done.ChecksumType]).to.deep.equal([crc32(whole), 'FULL_OBJECT']);
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }))).ChecksumCRC32).to.equal(crc32(whole));
  });

  it("refuses what S3 refuses: algorithm and type that do not go together, a part without the checksum or with another, a listed checksum that is not the part's", async () => {
    for (const [ChecksumAlgorithm_, ChecksumType] of [
      ['SHA256', 'FULL_OBJECT'],
      ['CRC64NVME', 'COMPOSITE'],
      ['MD5', undefined],
    ] as const) {
      const refused = await s3Failure(
        env.s3.send(
          new CreateMultipartUploadCommand({
            Bucket: bucket,
            Key: 'refused.bin',
            ChecksumAlgorithm: ChecksumAlgorithm_ as ChecksumAlgorithm,
            ...(ChecksumType ? { ChecksumType } : {}),
          }),
        ),
      );
      expect(refused, `${ChecksumAlgorithm_} ${ChecksumType}`).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    }
    const key = 'strict.bin';
    const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: ChecksumAlgorithm.SHA256 }));
    const part = Buffer.from('the only part');
    // No checksum at all (a presigned PUT), then a CRC32 where SHA256 is expected.
    const bare = await fetch(presignedPart(key, UploadId!, 1), { method: 'PUT', body: part });
    expect([bare.status, s3ErrorOf(await bare.text()).code]).to.deep.equal([400, 'InvalidRequest']);
    expect(
      await s3Failure(
        env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: part, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 })),
      ),
    ).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    // The same as a stream (its checksum a trailer, the internal hop chunked): refused before its body went up.
    expect(
      await s3Failure(
        env.s3.send(
          new UploadPartCommand({
            Bucket: bucket,
            Key: key,
            UploadId,
            PartNumber: 1,
            Body: Readable.from([randomBytes(300_000)]),
            ContentLength: 300_000,
            ChecksumAlgorithm: ChecksumAlgorithm.CRC32,
          }),
        ),
      ),
    ).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    expect((await env.s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId }))).Parts ?? []).to.deep.equal([]);

    const ok = await env.s3.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: part, ChecksumAlgorithm: ChecksumAlgorithm.SHA256 }),
    );
    expect(ok.ChecksumSHA256).to.equal(createHash('sha256').update(part).digest('base64'));
    const notTheParts = createHash('sha256').update('other').digest('base64');
    expect(
      await s3Failure(
        env.s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: bucket,
            Key: key,
            UploadId,
            MultipartUpload: { Parts: [{ PartNumber: 1, ETag: ok.ETag, ChecksumSHA256: notTheParts }] },
          }),
        ),
      ),
    ).to.deep.equal({ name: 'InvalidPart', status: 400 });
    const done = await env.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: ok.ETag, ChecksumSHA256: ok.ChecksumSHA256 }] },
      }),
    );
    expect(done.ChecksumSHA256).to.equal(`${createHash('sha256').update(Buffer.from(ok.ChecksumSHA256!, 'base64')).digest('base64')}-1`);
  });
});
