import { createHash, randomBytes } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { readFile, readdir, readlink, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { expect } from 'chai';
import { FILE_SINK_BUFFER, FileSink } from '../../images/data-plane/src/backends/file-sink.js';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { ThreadMd5 } from '../../images/data-plane/src/backends/md5-thread.js';
import { SmallBlobCache } from '../../images/data-plane/src/backends/small-blob-cache.js';
import { observed, S3Error } from '../../images/object-model/src/index.js';
import { freshDirPerTest } from '../support/temp-dir.js';

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
  const tmp = freshDirPerTest('strata-fs-sink-');

  it('writes every byte in order across buffer boundaries, whatever the chunk sizes', async () => {
    for (const [size, sizes] of [
      [3 * FILE_SINK_BUFFER + 12345, [65536]],
      [2 * FILE_SINK_BUFFER, [FILE_SINK_BUFFER]],
      [FILE_SINK_BUFFER + 1, [1, 7, 300_000, 2 * FILE_SINK_BUFFER]],
      [5, [2]],
    ] as Array<[number, number[]]>) {
      const data = randomBytes(size);
      const file = path.join(tmp.path, `f-${size}`);
      await pipeline(chunked(data, sizes), new FileSink(file));
      expect(md5(await readFile(file)), `${size} in chunks of ${sizes.join('/')}`).to.equal(md5(data));
    }
  });

  /** The open flags of this process's descriptor of `file` (from /proc/self/fdinfo), or undefined when none is open. */
  async function openFlags(file: string): Promise<number | undefined> {
    for (const fd of await readdir('/proc/self/fd')) {
      if ((await readlink(`/proc/self/fd/${fd}`).catch(() => '')) !== file) continue;
      const info = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8');
      return parseInt(/flags:\s+([0-7]+)/.exec(info)![1], 8);
    }
    return undefined;
  }

  /** Write `data` through `sink` in 64 KiB pieces; `afterFirst` runs once the first piece is in. */
  async function writeThrough(sink: FileSink, data: Buffer, afterFirst: () => Promise<void>): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      sink.on('finish', resolve);
      sink.on('error', reject);
    });
    for (let at = 0; at < data.length || at === 0; at += 65536) {
      await new Promise<void>((resolve, reject) => sink.write(data.subarray(at, at + 65536), (err) => (err ? reject(err) : resolve())));
      if (at === 0) await afterFirst();
    }
    sink.end();
    await done;
  }

  it('writes large bodies past the page cache (O_DIRECT) and cuts the padded last block back: exact bytes, exact size', async () => {
    for (const size of [1, 4095, 4096, 4097, FILE_SINK_BUFFER - 1, FILE_SINK_BUFFER, 5 * FILE_SINK_BUFFER + 12345]) {
      const data = randomBytes(size);
      const file = path.join(tmp.path, `direct-${size}`);
      const hash = new ThreadMd5();
      let flags: number | undefined;
      await writeThrough(new FileSink(file, hash), data, async () => {
        flags = await openFlags(file);
      });
      expect(flags! & constants.O_DIRECT, `${size}: opened with O_DIRECT`).to.equal(constants.O_DIRECT);
      expect((await stat(file)).size, `${size}: file size`).to.equal(size);
      expect(md5(await readFile(file)), `${size}: bytes`).to.equal(md5(data));
      expect(await hash.digestHex(), `${size}: MD5 of the shared buffers`).to.equal(md5(data));
    }
  });

  it('writes through the page cache when direct writes are off', async () => {
    const data = randomBytes(FILE_SINK_BUFFER + 4321);
    const file = path.join(tmp.path, 'buffered');
    let flags: number | undefined;
    await writeThrough(new FileSink(file, undefined, false), data, async () => {
      flags = await openFlags(file);
    });
    expect(flags).to.be.a('number');
    expect(flags! & constants.O_DIRECT).to.equal(0);
    expect(md5(await readFile(file))).to.equal(md5(data));
  });

  it('keeps concurrent bodies apart: more sinks at once than pooled buffers, each file and MD5 exact', async () => {
    const bodies = Array.from({ length: 12 }, (_, i) => randomBytes(2 * FILE_SINK_BUFFER + 1000 * i + 1));
    const results = await Promise.all(
      bodies.map(async (data, i) => {
        const file = path.join(tmp.path, `concurrent-${i}`);
        const hash = new ThreadMd5();
        await pipeline(chunked(data, [65536, 12345]), new FileSink(file, hash, i % 3 !== 0));
        return { bytes: md5(await readFile(file)), hash: await hash.digestHex() };
      }),
    );
    expect(results).to.deep.equal(bodies.map((b) => ({ bytes: md5(b), hash: md5(b) })));
  });

  it('creates an empty file for an empty body, and never overwrites an existing file', async () => {
    const empty = path.join(tmp.path, 'empty');
    await pipeline(Readable.from([]), new FileSink(empty));
    expect((await stat(empty)).size).to.equal(0);
    const existing = path.join(tmp.path, 'existing');
    await writeFile(existing, 'keep');
    let failed: NodeJS.ErrnoException | undefined;
    await pipeline(Readable.from([Buffer.from('new')]), new FileSink(existing)).catch((err: NodeJS.ErrnoException) => (failed = err));
    expect(failed?.code).to.equal('EEXIST');
    expect(await readFile(existing, 'utf8')).to.equal('keep');
  });

  it('stops on a failing body and closes the file', async () => {
    const file = path.join(tmp.path, 'broken');
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

  it('loses no byte of a large read stream counted on its way and handed over (what the object layer hands UploadPartCopy)', async () => {
    const fs = new FsBackend(tmp.path);
    const data = randomBytes(2 * FILE_SINK_BUFFER + 4321);
    const source = path.join(tmp.path, 'source.bin');
    await writeFile(source, data);
    for (let i = 0; i < 5; i++) {
      // Counted as the object layer's read counts its bytes out (a 'data' listener there had made the stream
      // flow at once, dropping what it emitted while the sink's file opened).
      let counted = 0;
      const body = observed(createReadStream(source, { highWaterMark: 65536 }), (chunk) => (counted += chunk.length));
      const blob = await fs.put(body, { expectedSize: data.length, part: true });
      expect(blob).to.include({ size: data.length, md5: md5(data) });
      expect(counted).to.equal(data.length);
    }
  });

  it('stores, hashes and reads back a body larger than one buffer; checks size and digest', async () => {
    const fs = new FsBackend(tmp.path);
    const data = randomBytes(2 * FILE_SINK_BUFFER + 777);
    const blob = await fs.put(chunked(data, [65536]), { expectedSize: data.length, expectedMd5: md5(data) });
    expect(blob).to.include({ size: data.length, md5: md5(data) });
    expect(md5(await bytesOf(await fs.get(blob.locator)))).to.equal(md5(data));
    expect(md5(await bytesOf(await fs.get(blob.locator, { start: 100, end: FILE_SINK_BUFFER + 99 })))).to.equal(
      md5(data.subarray(100, FILE_SINK_BUFFER + 100)),
    );

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

describe('data plane: small blobs kept in memory (SmallBlobCache)', () => {
  const tmp = freshDirPerTest('strata-small-blobs-');

  it('stays within its byte bound, evicting the least recently used blob first; keeps no blob over its size limit', () => {
    const cache = new SmallBlobCache(10, 6);
    const lookups: boolean[] = [];
    const counted = new SmallBlobCache(10, 6, (hit) => lookups.push(hit));
    cache.set('a', Buffer.from('aaaa'));
    cache.set('b', Buffer.from('bbbb'));
    expect(cache.get('a')?.toString()).to.equal('aaaa'); // a is now the most recently used
    cache.set('c', Buffer.from('cccc')); // 12 bytes > 10: b goes
    expect(cache.get('b')).to.equal(undefined);
    expect(cache.get('a')?.toString()).to.equal('aaaa');
    expect(cache.get('c')?.toString()).to.equal('cccc');
    expect(cache.bytes).to.equal(8);
    cache.set('big', Buffer.from('1234567'));
    expect(cache.get('big')).to.equal(undefined);
    cache.set('a', Buffer.from('AA')); // replacing an entry re-counts its bytes
    expect(cache.bytes).to.equal(6);
    cache.delete('a');
    expect([cache.get('a'), cache.bytes, cache.size]).to.deep.equal([undefined, 4, 1]);
    // An entry is a copy: changing the caller's buffer afterwards changes nothing.
    const source = Buffer.from('xyz');
    counted.set('x', source);
    source.fill(0);
    expect(counted.get('x')?.toString()).to.equal('xyz');
    expect(counted.get('y')).to.equal(undefined);
    expect(lookups).to.deep.equal([true, false]);
  });

  it('serves a small blob read whole from memory afterwards (ranges too), never a deleted one, and leaves larger blobs to the disk', async () => {
    const cache = new SmallBlobCache(1024 * 1024, 64 * 1024);
    const fs = new FsBackend(tmp.path, { smallBlobs: cache });
    const small = randomBytes(4096);
    const blob = await fs.put(Readable.from([small]), { expectedSize: small.length });
    expect((await bytesOf(await fs.get(blob.locator, { start: 0, end: 9 }))).equals(small.subarray(0, 10))).to.equal(true);
    expect(cache.size, 'a range read is not the whole blob').to.equal(0);
    expect((await bytesOf(await fs.get(blob.locator))).equals(small)).to.equal(true);
    expect(cache.size).to.equal(1);
    // The bytes now come from memory: the same answers, whole and ranged.
    expect((await bytesOf(await fs.get(blob.locator))).equals(small)).to.equal(true);
    expect((await bytesOf(await fs.get(blob.locator, { start: 100, end: 4095 }))).equals(small.subarray(100))).to.equal(true);
    expect((await bytesOf(await fs.get(blob.locator, { start: 4095, end: 4095 }))).equals(small.subarray(4095))).to.equal(true);

    // Deleting the blob forgets it: a read fails as it does for any missing blob.
    await fs.delete(blob.locator);
    expect(cache.size).to.equal(0);
    expect(
      await fs.get(blob.locator).then(
        () => 'read',
        (err: Error) => err.name,
      ),
    ).to.equal('BlobMissingError');

    const empty = await fs.put(Readable.from([]), { expectedSize: 0 });
    expect((await bytesOf(await fs.get(empty.locator))).length).to.equal(0);
    expect((await bytesOf(await fs.get(empty.locator))).length, 'from memory').to.equal(0);

    const large = randomBytes(64 * 1024 + 1);
    const big = await fs.put(Readable.from([large]), { expectedSize: large.length });
    expect(md5(await bytesOf(await fs.get(big.locator)))).to.equal(md5(large));
    expect(cache.get(big.locator)).to.equal(undefined);
  });
});
