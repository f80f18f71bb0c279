import { randomBytes } from 'node:crypto';
import { open, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { FileReadStream } from '../../images/data-plane/src/backends/file-read-stream.js';
import { freshDirPerSuite } from '../support/temp-dir.js';

const collect = async (s: FileReadStream) => {
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(c as Buffer);
  return Buffer.concat(parts);
};

/** A large blob read with several reads in flight, pushed in file order (fs-backend.ts reads large blobs with it). */
describe('data plane: FileReadStream (several reads in flight, in order)', () => {
  const tmp = freshDirPerSuite('strata-file-read-');
  const data = randomBytes(5 * 65536 + 1234);
  let file: string;
  before(async () => {
    file = path.join(tmp.path, 'blob');
    await writeFile(file, data);
  });

  it('reads the whole file, and any range, byte-exact and in order, and closes the file at the end', async () => {
    const handle = await open(file, 'r');
    expect((await collect(new FileReadStream(handle, 0, undefined, 65536, 3))).equals(data)).to.equal(true);
    expect(handle.fd).to.equal(-1);
    for (const [start, end] of [
      [0, 0],
      [1, 65536],
      [65535, 65536 * 3 + 7],
      [data.length - 10, data.length - 1],
    ] as const) {
      const got = await collect(new FileReadStream(await open(file, 'r'), start, end, 65536, 3));
      expect(got.equals(data.subarray(start, end + 1)), `${start}-${end}`).to.equal(true);
    }
  });

  it('keeps at most `depth` reads ahead of a consumer that stopped taking chunks', async () => {
    const handle = await open(file, 'r');
    const read = handle.read.bind(handle);
    let reads = 0;
    Object.assign(handle, { read: (...args: Parameters<FileHandle['read']>) => (reads++, read(...args)) });
    const stream = new FileReadStream(handle, 0, undefined, 4096, 2);
    stream.pause();
    stream.once('readable', () => undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Its buffer (depth × chunk) filled and the reads it then had in flight: nowhere near the file's 80 chunks.
    expect(reads).to.be.at.most(6);
    stream.destroy();
    await new Promise((resolve) => stream.once('close', resolve));
    expect(handle.fd).to.equal(-1);
  });

  it('a consumer that fails midway closes the file once its reads in flight are done', async () => {
    const handle = await open(file, 'r');
    let taken = 0;
    const failing = new Writable({
      write(_chunk, _enc, cb) {
        cb(++taken === 2 ? new Error('consumer gone') : null);
      },
    });
    const err = await pipeline(new FileReadStream(handle, 0, undefined, 65536, 4), failing).catch((e: unknown) => e as Error);
    expect(err).to.be.instanceOf(Error);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(handle.fd).to.equal(-1);
  });

  it('a read behind the head that fails first ends the stream with its error in turn, not as an unhandled rejection', async () => {
    const handle = await open(file, 'r');
    const read = handle.read.bind(handle);
    // The first chunk's read is slow; the third fails at once, long before the stream awaits it.
    Object.assign(handle, {
      read: (buf: Buffer, offset: number, length: number, position: number) =>
        position === 0
          ? new Promise((resolve) => setTimeout(resolve, 100)).then(() => read(buf, offset, length, position))
          : position >= 2 * 65536
            ? Promise.reject(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' }))
            : read(buf, offset, length, position),
    });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const err = await collect(new FileReadStream(handle, 0, undefined, 65536, 4)).catch((e: unknown) => e as Error);
      expect((err as NodeJS.ErrnoException).code).to.equal('EIO');
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).to.deep.equal([]);
      expect(handle.fd).to.equal(-1);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
