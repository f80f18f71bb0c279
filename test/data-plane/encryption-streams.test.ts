import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { Md5Tap, ThreadMd5 } from '../../images/data-plane/src/backends/md5-thread.js';
import { CHUNK, SegmentDecryptor, SegmentEncryptor, segmentSize } from '../../images/data-plane/src/encryption/chunked-aead.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** `data` as a stream of chunks of the given sizes (cycled), as sockets deliver bodies. */
function chunked(data: Buffer, sizes: number[]): Readable {
  const parts: Buffer[] = [];
  for (let at = 0, i = 0; at < data.length; i++) {
    const n = sizes[i % sizes.length]!;
    parts.push(data.subarray(at, at + n));
    at += n;
  }
  return Readable.from(parts);
}

async function collect(stream: Readable): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const c of stream) out.push(c as Buffer);
  return out;
}

const decrypt = (key: Buffer, stored: Buffer, plain: number) => collect(Readable.from([stored]).pipe(new SegmentDecryptor(key, undefined, plain, 0, 0, plain)));

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
        const [stored] = await Promise.all([collect(encryptor).then((c) => Buffer.concat(c)), pipeline(chunked(data, [7, 65_536, 1000, 131_072]), encryptor)]);
        expect(stored.length, `${size}, known ${known}: stored size`).to.equal(segmentSize(size));
        expect(md5(Buffer.concat(await decrypt(key, stored, size))), `${size}, known ${known}: plaintext`).to.equal(md5(data));
      }
    }
  });

  it('with the size known, a longer body fails the stream', async () => {
    const encryptor = new SegmentEncryptor(randomBytes(32), () => undefined, CHUNK);
    encryptor.resume();
    const err = await pipeline(chunked(randomBytes(CHUNK + 1), [CHUNK, 1]), encryptor).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).to.match(/longer than its Content-Length/);
  });

  it('passes on one buffer of plaintext per stored piece it is given (not one per chunk)', async () => {
    const key = randomBytes(32);
    const size = 16 * CHUNK;
    const data = randomBytes(size);
    const encryptor = new SegmentEncryptor(key, () => undefined, size);
    const [stored] = await Promise.all([collect(encryptor).then((c) => Buffer.concat(c)), pipeline(Readable.from([data]), encryptor)]);
    // 'data' events, one per buffer passed on (an async iterator would join what is buffered).
    const pieces: Buffer[] = [];
    const decryptor = new SegmentDecryptor(key, undefined, size, 0, 0, size);
    decryptor.on('data', (c: Buffer) => pieces.push(c));
    await pipeline(Readable.from([stored]), decryptor);
    expect(pieces).to.have.length(1);
    expect(md5(pieces[0]!)).to.equal(md5(data));
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
      const [passed] = await Promise.all([collect(tap).then((c) => Buffer.concat(c)), pipeline(chunked(data, [65_536, 3, 100_000]), tap)]);
      expect(md5(passed), `${size}: bytes passed on`).to.equal(md5(data));
      expect(await hash.digestHex(), `${size}: MD5`).to.equal(md5(data));
      expect(updates, `${size}: messages to the thread`).to.equal(Math.ceil(size / 1048576));
    }
  });
});
