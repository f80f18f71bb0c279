import {
  ChecksumAlgorithm,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { Crc64Nvme } from '@aws-sdk/checksums/crc';
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { crc32 } from './support/checksums.js';
import { bodyBytes, completedParts, describeWithBucket, expectAbsent, rootPresign, s3ErrorOf, s3Failure } from './support/s3.js';

describeWithBucket('e2e: multipart uploads with a checksum algorithm (COMPOSITE and FULL_OBJECT)', 'summpu', (env, bucket) => {
  const MiB = 1024 * 1024;
  const crc64 = async (data: Buffer) => {
    const d = new Crc64Nvme();
    d.update(data);
    return Buffer.from(await d.digest()).toString('base64');
  };
  const presignedPart = (key: string, uploadId: string, n: number) =>
    rootPresign(env.p.endpoint, 'PUT', `/${bucket}/${key}`, {
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
    await expectAbsent(env.s3, bucket, key);

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
          Parts: completedParts([copied.CopyPartResult, last]),
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
