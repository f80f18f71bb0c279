import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { ThreadMd5 } from '../../images/data-plane/src/backends/md5-thread.js';
import { CHUNK, SegmentEncryptor, segmentSize } from '../../images/data-plane/src/encryption/chunked-aead.js';
import { ThreadedSegmentEncryptor } from '../../images/data-plane/src/encryption/encrypt-thread.js';
import { chunked, collect, decrypted, failure, md5 } from '../support/encryption-streams.js';

const BATCH = 16 * CHUNK;

describe('data plane: encryption on the encryption threads (ThreadedSegmentEncryptor)', () => {
  it('writes the layout SegmentEncryptor writes, size known or not, at every chunk and batch border, and hashes every byte', async () => {
    const key = randomBytes(32);
    for (const size of [0, 1, CHUNK, BATCH - 1, BATCH, BATCH + 1, 3 * BATCH, 3 * BATCH + 5 * CHUNK + 17]) {
      const data = randomBytes(size);
      for (const known of [true, false]) {
        const hash = new ThreadMd5();
        let checked = '';
        const encryptor = new ThreadedSegmentEncryptor(
          key,
          async () => {
            checked = await hash.digestHex();
          },
          known ? size : undefined,
          'tenant-a',
          hash,
        );
        const [stored] = await Promise.all([collect(encryptor), pipeline(chunked(data, [7, 65_536, 1000, 1_048_576, 131_072]), encryptor)]);
        const what = `${size}, known ${known}`;
        expect(stored.length, `${what}: stored size`).to.equal(segmentSize(size));
        expect(md5(await decrypted(key, stored, size)), `${what}: plaintext`).to.equal(md5(data));
        expect(checked, `${what}: MD5 given to the check`).to.equal(md5(data));
        // The same bytes as the in-place encryptor's, but for the random nonce prefix.
        const inPlace = new SegmentEncryptor(key, () => undefined, size);
        (inPlace as unknown as { prefix: Buffer }).prefix.set(stored.subarray(0, 8));
        const [reference] = await Promise.all([collect(inPlace), pipeline(Readable.from([data]), inPlace)]);
        expect(md5(stored.subarray(8)), `${what}: ciphertext`).to.equal(md5(reference.subarray(8)));
      }
    }
  });

  it('with the size known, a longer body fails, and a failed check seals no last chunk', async () => {
    const key = randomBytes(32);
    const longer = new ThreadedSegmentEncryptor(key, () => undefined, BATCH);
    longer.resume();
    expect((await failure(pipeline(chunked(randomBytes(BATCH + 1), [BATCH, 1]), longer)))?.message).to.match(/longer than its Content-Length/);

    const size = 2 * BATCH + 100;
    const refused = new ThreadedSegmentEncryptor(key, () => Promise.reject(new Error('BadDigest')), size);
    const out: Buffer[] = [];
    refused.on('data', (c: Buffer) => out.push(c));
    expect((await failure(pipeline(Readable.from([randomBytes(size)]), refused)))?.message).to.equal('BadDigest');
    // Whatever was passed on stops short of the last batch: no segment that would decrypt.
    expect(Buffer.concat(out).length).to.be.at.most(8 + 2 * (BATCH + 16 * 16));
  });
});
