import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { Md5Tap, ThreadMd5 } from '../../images/data-plane/src/backends/md5-thread.js';
import { CHUNK, PlainWindow, SegmentDecryptor, SegmentEncryptor, segmentRange, segmentSize } from '../../images/data-plane/src/encryption/chunked-aead.js';
import { ThreadedSegmentDecryptor } from '../../images/data-plane/src/encryption/decrypt-thread.js';
import { chunked, collect, decrypted, failure, md5, sealed } from '../support/encryption-streams.js';

describe('data plane: encryption streams (chunked AES-GCM, MD5 tap)', () => {
  it('with the size known, enciphers bytes as they arrive: output before a chunk is full', async () => {
    const key = randomBytes(32);
    const encryptor = new SegmentEncryptor(key, () => undefined, 3 * CHUNK);
    const out: Buffer[] = [];
    encryptor.on('data', (c: Buffer) => out.push(c));
    await new Promise<void>((resolve) => encryptor.write(randomBytes(1000), () => resolve()));
    // The 8-byte nonce prefix, then the 1 000 bytes enciphered (the chunk's tag comes once it is full).
    expect(Buffer.concat(out).length).to.equal(8 + 1000);
    encryptor.destroy();
  });

  it('with the size known or not, the same segment layout, which decrypts to the plaintext, at every chunk border', async () => {
    const key = randomBytes(32);
    for (const size of [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 17]) {
      const data = randomBytes(size);
      for (const known of [true, false]) {
        const encryptor = new SegmentEncryptor(key, () => undefined, known ? size : undefined);
        const [stored] = await Promise.all([collect(encryptor), pipeline(chunked(data, [7, 65_536, 1000, 131_072]), encryptor)]);
        expect(stored.length, `${size}, known ${known}: stored size`).to.equal(segmentSize(size));
        expect(md5(await decrypted(key, stored, size)), `${size}, known ${known}: plaintext`).to.equal(md5(data));
      }
    }
  });

  it('with the size known, a longer body fails the stream', async () => {
    const encryptor = new SegmentEncryptor(randomBytes(32), () => undefined, CHUNK);
    encryptor.resume();
    expect((await failure(pipeline(chunked(randomBytes(CHUNK + 1), [CHUNK, 1]), encryptor)))?.message).to.match(/longer than its Content-Length/);
  });

  it('passes on one buffer of plaintext per stored piece it is given (not one per chunk)', async () => {
    const key = randomBytes(32);
    const size = 16 * CHUNK;
    const data = randomBytes(size);
    const stored = await sealed(key, data);
    // 'data' events, one per buffer passed on (an async iterator would join what is buffered).
    const pieces: Buffer[] = [];
    const decryptor = new SegmentDecryptor(key, undefined, size, 0, 0, size);
    decryptor.on('data', (c: Buffer) => pieces.push(c));
    await pipeline(Readable.from([stored]), decryptor);
    expect(pieces).to.have.length(1);
    expect(md5(pieces[0]!)).to.equal(md5(data));
  });

  describe('decryption on the decryption thread (ThreadedSegmentDecryptor)', () => {
    const key = randomBytes(32);
    const size = 40 * CHUNK + 777;
    const data = randomBytes(size);
    let stored: Buffer;
    before(async () => {
      stored = await sealed(key, data);
    });
    /** Plaintext [start, end] read as the object layer reads it: the chunks that cover it, the prefix apart when they do not start the segment. */
    const read = async (start: number, end: number, bytes = stored, sizes = [1048576, 65_552, 100]) => {
      const r = segmentRange(size, start, end);
      const prefix = r.first === 0 ? undefined : bytes.subarray(0, 8);
      const from = r.first === 0 ? 0 : r.from;
      const decryptor = new ThreadedSegmentDecryptor(prefix, { key, window: new PlainWindow(size, r.first, r.skip, end - start + 1) });
      const [out] = await Promise.all([collect(decryptor), pipeline(chunked(bytes.subarray(from, r.to + 1), sizes), decryptor)]);
      return out;
    };

    it('deciphers whole segments and ranges exactly, whatever the pieces the bytes come in', async () => {
      const cases: Array<[number, number]> = [
        [0, size - 1],
        [1, size - 2],
        [CHUNK - 1, CHUNK],
        [5 * CHUNK + 3, 37 * CHUNK + 9],
        [size - 1, size - 1],
        [17 * CHUNK, size - 1],
      ];
      for (const [start, end] of cases) {
        for (const sizes of [[1048576], [7, 65_536, 333_333]]) {
          expect(md5(await read(start, end, stored, sizes)), `[${start}, ${end}] in pieces ${sizes}`).to.equal(md5(data.subarray(start, end + 1)));
        }
      }
    });

    it('fails on an altered byte or a stream cut short, as the in-place decryptor does', async () => {
      const altered = Buffer.from(stored);
      altered[8 + 30 * (CHUNK + 16) + 5]! ^= 1;
      expect((await failure(read(0, size - 1, altered)))?.message).to.match(/failed authentication/);
      expect((await failure(read(0, size - 1, stored.subarray(0, stored.length - 10))))?.message).to.match(/failed authentication/);
    });
  });

  it('Md5Tap: passes every byte on unchanged and hashes them on the MD5 thread, one message per MiB', async () => {
    for (const size of [0, 5, 1048576, 3 * 1048576 + 12_345]) {
      const data = randomBytes(size);
      const hash = new ThreadMd5();
      let updates = 0;
      const update = hash.update.bind(hash);
      hash.update = (bytes) => {
        updates++;
        return update(bytes);
      };
      const tap = new Md5Tap(hash);
      const [passed] = await Promise.all([collect(tap), pipeline(chunked(data, [65_536, 3, 100_000]), tap)]);
      expect(md5(passed), `${size}: bytes passed on`).to.equal(md5(data));
      expect(await hash.digestHex(), `${size}: MD5`).to.equal(md5(data));
      expect(updates, `${size}: messages to the thread`).to.equal(Math.ceil(size / 1048576));
    }
  });
});
