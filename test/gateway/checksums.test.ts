import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { ChecksumCheck, uploadChecksum } from '../../images/gateway/src/s3/checksums.js';
import { VerifiedBody } from '../../images/gateway/src/s3/verified-body.js';
import { S3Error, type ChecksumAlgorithm } from '../../images/object-model/src/index.js';

/** The catalogue check values of each CRC ("123456789"), and the hashes from node:crypto. */
const CHECK_INPUT = Buffer.from('123456789');
const hex = (h: string) => Buffer.from(h, 'hex').toString('base64');
const EXPECTED: Record<ChecksumAlgorithm, string> = {
  CRC32: hex('cbf43926'),
  CRC32C: hex('e3069283'),
  CRC64NVME: hex('ae8b14860a799888'),
  SHA1: createHash('sha1').update(CHECK_INPUT).digest('base64'),
  SHA256: createHash('sha256').update(CHECK_INPUT).digest('base64'),
};

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof S3Error) return `${err.code}: ${err.message}`;
    throw err;
  }
  return 'no error';
}

async function run(check: ChecksumCheck, pieces: Buffer[]): Promise<{ passed: Buffer; error?: S3Error }> {
  const body = Readable.from(pieces).pipe(new VerifiedBody([check]));
  const passed: Buffer[] = [];
  return new Promise((resolve) => {
    body.on('data', (c: Buffer) => passed.push(c));
    body.on('end', () => resolve({ passed: Buffer.concat(passed) }));
    body.on('error', (error: S3Error) => resolve({ passed: Buffer.concat(passed), error }));
  });
}

describe('gateway: flexible checksums on uploads', () => {
  for (const [algorithm, value] of Object.entries(EXPECTED) as Array<[ChecksumAlgorithm, string]>) {
    it(`${algorithm}: the check value passes (in pieces) and is kept for the answer; one bit off is BadDigest`, async () => {
      const header = `x-amz-checksum-${algorithm.toLowerCase()}`;
      const spec = uploadChecksum({ [header]: value, 'x-amz-sdk-checksum-algorithm': algorithm.toLowerCase() }, false)!;
      expect(spec).to.deep.equal({ algorithm, header, expected: value });
      const good = new ChecksumCheck(spec);
      const ok = await run(good, [CHECK_INPUT.subarray(0, 4), CHECK_INPUT.subarray(4)]);
      expect(ok.error).to.equal(undefined);
      expect(ok.passed.equals(CHECK_INPUT)).to.equal(true);
      expect(good.value).to.equal(value);

      const flipped = Buffer.from(CHECK_INPUT);
      flipped[8] ^= 1;
      const bad = new ChecksumCheck(spec);
      const failed = await run(bad, [flipped.subarray(0, 4), flipped.subarray(4)]);
      expect(failed.error?.code).to.equal('BadDigest');
      expect(failed.error?.message).to.equal(`The ${algorithm} you specified did not match the calculated checksum.`);
      // The last piece is withheld: downstream never sees the whole (bad) body.
      expect(failed.passed.length).to.be.lessThan(flipped.length);
      expect(bad.value).to.equal(undefined);
    });
  }

  it('a trailer checksum is read once the body has ended; a missing or malformed one is refused', async () => {
    const spec = uploadChecksum({ 'x-amz-trailer': 'x-amz-checksum-crc32' }, true)!;
    expect(spec).to.deep.equal({ algorithm: 'CRC32', header: 'x-amz-checksum-crc32' });
    const trailers: Record<string, string> = {};
    const check = new ChecksumCheck(spec, () => trailers);
    const body = Readable.from([CHECK_INPUT]).pipe(new VerifiedBody([check]));
    // The trailer arrives with the end of the body, after the check was set up.
    trailers['x-amz-checksum-crc32'] = EXPECTED.CRC32;
    for await (const piece of body) void piece;
    expect(check.value).to.equal(EXPECTED.CRC32);

    const missing = await run(new ChecksumCheck(spec, () => ({})), [CHECK_INPUT]);
    expect(missing.error?.code).to.equal('MalformedTrailerError');
    const malformed = await run(new ChecksumCheck(spec, () => ({ 'x-amz-checksum-crc32': 'not base64!' })), [CHECK_INPUT]);
    expect(malformed.error?.code).to.equal('InvalidRequest');
  });

  it('headers S3 refuses are InvalidRequest before any byte is read; none is no check', () => {
    expect(uploadChecksum({}, false)).to.equal(undefined);
    expect(uploadChecksum({ 'x-amz-checksum-mode': 'ENABLED', 'x-amz-checksum-algorithm': 'CRC32', 'x-amz-checksum-type': 'FULL_OBJECT' }, false)).to.equal(
      undefined,
    );
    const refusals: Array<[Record<string, string>, boolean, string]> = [
      [{ 'x-amz-checksum-crc32': EXPECTED.CRC32, 'x-amz-checksum-sha1': EXPECTED.SHA1 }, false, 'Multiple checksum Types are not allowed'],
      [{ 'x-amz-checksum-crc32': EXPECTED.CRC32, 'x-amz-trailer': 'x-amz-checksum-crc32c' }, true, 'Multiple checksum Types are not allowed'],
      [{ 'x-amz-checksum-crc32': 'AAAA' }, false, 'Value for x-amz-checksum-crc32 header is invalid.'],
      [{ 'x-amz-checksum-crc32': EXPECTED.SHA1 }, false, 'Value for x-amz-checksum-crc32 header is invalid.'],
      [{ 'x-amz-checksum-sha256': 'not base64 at all!' }, false, 'Value for x-amz-checksum-sha256 header is invalid.'],
      [{ 'x-amz-sdk-checksum-algorithm': 'MD4', 'x-amz-checksum-crc32': EXPECTED.CRC32 }, false, 'Value for x-amz-sdk-checksum-algorithm header is invalid.'],
      [{ 'x-amz-sdk-checksum-algorithm': 'SHA256', 'x-amz-checksum-crc32': EXPECTED.CRC32 }, false, 'names SHA256'],
      [{ 'x-amz-sdk-checksum-algorithm': 'CRC32' }, false, 'no corresponding x-amz-checksum-* or x-amz-trailer'],
      [{ 'x-amz-trailer': 'x-amz-checksum-md5' }, true, 'x-amz-trailer header is not supported'],
      [{ 'x-amz-trailer': 'x-amz-checksum-crc32' }, false, 'needs an aws-chunked body'],
    ];
    for (const [headers, chunked, message] of refusals) {
      const outcome = codeOf(() => uploadChecksum(headers, chunked));
      expect(outcome, JSON.stringify(headers)).to.match(/^InvalidRequest: /);
      expect(outcome, JSON.stringify(headers)).to.include(message);
    }
  });
});
