import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { compositeChecksum, fullObjectChecksum, multipartChecksumTypes, startDigest, type ChecksumAlgorithm } from '../../images/object-model/src/index.js';

const checksum = async (algorithm: ChecksumAlgorithm, data: Buffer): Promise<string> => {
  const digest = startDigest(algorithm);
  digest.update(data);
  return Buffer.from(await digest.digest()).toString('base64');
};

describe('service kit: checksums of multipart objects', () => {
  it("FULL_OBJECT: combining the parts' CRCs gives the CRC of their bytes one after the other (CRC32, CRC32C, CRC64NVME)", async () => {
    // Sizes that exercise the combination: empty, one byte, odd, repeated (the cached operator), large.
    const parts = [randomBytes(1000), Buffer.alloc(0), randomBytes(1), randomBytes(77_777), randomBytes(77_777), randomBytes(3 * 1024 * 1024 + 5)];
    for (const algorithm of ['CRC32', 'CRC32C', 'CRC64NVME'] as const) {
      const listed = await Promise.all(parts.map(async (p) => ({ value: await checksum(algorithm, p), size: p.length })));
      expect(fullObjectChecksum(algorithm, listed), algorithm).to.equal(await checksum(algorithm, Buffer.concat(parts)));
      expect(fullObjectChecksum(algorithm, listed.slice(0, 1)), `${algorithm}, one part`).to.equal(listed[0]!.value);
    }
    // And against zlib's own CRC-32, independent of the digests above.
    const a = randomBytes(4096);
    const b = randomBytes(12_345);
    const crc = (d: Buffer) => Buffer.from((zlib.crc32(d) >>> 0).toString(16).padStart(8, '0'), 'hex').toString('base64');
    expect(
      fullObjectChecksum('CRC32', [
        { value: crc(a), size: a.length },
        { value: crc(b), size: b.length },
      ]),
    ).to.equal(crc(Buffer.concat([a, b])));
  });

  it('FULL_OBJECT has no meaning for SHA: refused', () => {
    expect(() => fullObjectChecksum('SHA256', [{ value: 'AA==', size: 1 }])).to.throw(/SHA256/);
  });

  it("COMPOSITE: the digest of the parts' digests, with the part count", async () => {
    const digests = [createHash('sha1').update('one').digest(), createHash('sha1').update('two').digest()];
    const expected = `${createHash('sha1').update(Buffer.concat(digests)).digest('base64')}-2`;
    expect(
      await compositeChecksum(
        'SHA1',
        digests.map((d) => d.toString('base64')),
      ),
    ).to.equal(expected);
  });

  it("knows which types each algorithm allows, S3's default first", () => {
    expect(multipartChecksumTypes('CRC32')).to.deep.equal(['COMPOSITE', 'FULL_OBJECT']);
    expect(multipartChecksumTypes('CRC64NVME')).to.deep.equal(['FULL_OBJECT']);
    expect(multipartChecksumTypes('SHA256')).to.deep.equal(['COMPOSITE']);
  });
});
