import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, readlink, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { FILE_SINK_BUFFER, FileSink } from '../../images/data-plane/src/backends/file-sink.js';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { ThreadMd5 } from '../../images/data-plane/src/backends/md5-thread.js';
import { S3Error } from '../../images/service-kit/src/index.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** `data` as a stream of chunks of the given sizes (cycled), as sockets deliver bodies. */
function chunked(data: Buffer, sizes: number[]): Readable {
  const parts: Buffer[] = [];
  for (let at = 0, i = 0; at < data.length; i++) {
    const n = sizes[i % sizes.length];
    parts.push(data.subarray(at, at + n));
    at += n;
  }
  return Readable.from(parts);
}

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('data plane: fs backend large bodies (FileSink)', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'strata-fs-sink-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes every byte in order across buffer boundaries, whatever the chunk sizes', async () => {
    for (const [size, sizes] of [
      [3 * FILE_SINK_BUFFER + 12345, [65536]],
      [2 * FILE_SINK_BUFFER, [FILE_SINK_BUFFER]],
      [FILE_SINK_BUFFER + 1, [1, 7, 300_000, 2 * FILE_SINK_BUFFER]],
      [5, [2]],
    ] as Array<[number, number[]]>) {
      const data = randomBytes(size);
      const file = path.join(dir, `f-${size}`);
      await pipeline(chunked(data, sizes), new FileSink(file));
      expect(md5(await readFile(file)), `${size} in chunks of ${sizes.join('/')}`).to.equal(md5(data));
    }
  });

  it('creates an empty file for an empty body, and never overwrites an existing file', async () => {
    const empty = path.join(dir, 'empty');
    await pipeline(Readable.from([]), new FileSink(empty));
    expect((await stat(empty)).size).to.equal(0);
    const existing = path.join(dir, 'existing');
    await writeFile(existing, 'keep');
    let failed: NodeJS.ErrnoException | undefined;
    await pipeline(Readable.from([Buffer.from('new')]), new FileSink(existing)).catch((err: NodeJS.ErrnoException) => (failed = err));
    expect(failed?.code).to.equal('EEXIST');
    expect(await readFile(existing, 'utf8')).to.equal('keep');
  });

  it('stops on a failing body and closes the file', async () => {
    const file = path.join(dir, 'broken');
    async function* failing() {
      yield randomBytes(FILE_SINK_BUFFER + 10);
      throw new Error('client went away');
    }
    let failed: Error | undefined;
    await pipeline(Readable.from(failing()), new FileSink(file)).catch((err: Error) => (failed = err));
    expect(failed?.message).to.equal('client went away');
    // No descriptor of this process still points at the file (closing may finish just after the failure).
    const openOnFile = async () => {
      let n = 0;
      for (const fd of await readdir('/proc/self/fd').catch(() => [] as string[])) {
        if ((await readlink(`/proc/self/fd/${fd}`).catch(() => '')) === file) n++;
      }
      return n;
    };
    for (let i = 0; i < 50 && (await openOnFile()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await openOnFile()).to.equal(0);
  });

  it('stores, hashes and reads back a body larger than one buffer; checks size and digest', async () => {
    const fs = new FsBackend(dir);
    const data = randomBytes(2 * FILE_SINK_BUFFER + 777);
    const blob = await fs.put(chunked(data, [65536]), { expectedSize: data.length, expectedMd5: md5(data) });
    expect(blob).to.include({ size: data.length, md5: md5(data) });
    expect(md5(await bytesOf(await fs.get(blob.locator)))).to.equal(md5(data));
    expect(md5(await bytesOf(await fs.get(blob.locator, { start: 100, end: FILE_SINK_BUFFER + 99 })))).to.equal(md5(data.subarray(100, FILE_SINK_BUFFER + 100)));

    const bad = fs.put(chunked(data, [65536]), { expectedSize: data.length, expectedMd5: md5(Buffer.from('other')) });
    expect(await bad.catch((err: S3Error) => err.code)).to.equal('BadDigest');
    const short = fs.put(chunked(data.subarray(0, FILE_SINK_BUFFER + 5), [65536]), { expectedSize: data.length });
    expect(await short.catch((err: S3Error) => err.code)).to.equal('IncompleteBody');
    // Neither failed body left a blob or a temp file behind.
    const files: string[] = [];
    const walk = async (d: string): Promise<void> => {
      for (const e of await readdir(d, { withFileTypes: true })) {
        if (e.isDirectory()) await walk(path.join(d, e.name));
        else files.push(e.name);
      }
    };
    await walk(fs.root);
    expect(files).to.deep.equal([blob.locator]);
  });
});

describe('data plane: MD5 on the worker thread (ThreadMd5)', () => {
  it('hashes concurrent streams independently and in order, copied or read in place from shared memory', async () => {
    const bodies = [randomBytes(9 * 1024 * 1024 + 3), randomBytes(100), Buffer.alloc(0)];
    const digests = await Promise.all(
      bodies.map(async (body, i) => {
        const h = new ThreadMd5();
        const shared = Buffer.from(new SharedArrayBuffer(1024 * 1024));
        for (let at = 0; at < body.length; at += 1024 * 1024) {
          const n = body.copy(i === 0 ? shared : Buffer.alloc(Math.min(1024 * 1024, body.length - at)), 0, at, at + 1024 * 1024);
          const piece = i === 0 ? shared.subarray(0, n) : Buffer.from(body.subarray(at, at + n));
          await h.update(piece);
          piece.fill(0); // once update resolved, the bytes are hashed: the caller may reuse its buffer
        }
        return h.digestHex();
      }),
    );
    expect(digests).to.deep.equal(bodies.map(md5));
  });

  it('forgets a dropped hash', async () => {
    const h = new ThreadMd5();
    await h.update(Buffer.from('abc'));
    h.drop();
    const other = new ThreadMd5();
    await other.update(Buffer.from('xyz'));
    expect(await other.digestHex()).to.equal(md5(Buffer.from('xyz')));
  });
});
