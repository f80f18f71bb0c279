import { randomUUID } from 'node:crypto';
import { close as closeFd, createReadStream, createWriteStream, open as openFd, read as readFd } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipelineClosed } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import { FileReadStream } from './file-read-stream.js';
import { FILE_SINK_BUFFER, FileSink } from './file-sink.js';
import { ThreadMd5 } from './md5-thread.js';
import { bodyMeter, detachedBody, HashingCounter, meteredBody, readSmallBody } from './metered-body.js';
import type { SmallBlobCache } from './small-blob-cache.js';
import { BlobMissingError, type ByteRange, type HashedBlob, type PutOptions, type StorageBackend, type StoredBlob } from './storage-backend.js';

/**
 * 32 random hex digits (122 random bits: a UUID v4 without its dashes). crypto.randomUUID draws from a
 * cached pool of entropy, where randomBytes() would call into OpenSSL for every blob.
 */
const randomId = (): string => randomUUID().replaceAll('-', '');

/**
 * Blob locators are 32 hex digits; multipart parts carry a `p` prefix and live under `parts/`; inline
 * blobs (bytes in the metadata database, no file) an `i` prefix.
 */
const LOCATOR = /^p?[0-9a-f]{32}$/;
const INLINE_LOCATOR = /^i[0-9a-f]{32}$/;

/**
 * Small blobs kept inline: their bytes go into the metadata database with the blob's row, committed in
 * the object's own transaction, instead of into a file (as MinIO keeps small objects inside their
 * metadata file). A small PUT then costs no file create, write, fsync, rename and directory fsync (and
 * its overwrite no unlink), a large share of a small PUT's CPU (hack/adr/0003-inline-small-blobs.md). The
 * bytes are exactly as durable as the object's metadata, which names them in the same commit.
 */
export interface InlineBlobs {
  /** Bodies of at most this many bytes (known Content-Length) are kept inline. */
  maxBytes: number;
  /** The bytes of an inline blob, from the database; undefined when no row holds them. */
  load(locator: string): Promise<Buffer | undefined>;
}
const TEMP_SUFFIX = '.tmp';
/** Objects up to this size are read with one read() call (GET/HEAD of small objects is the hot path). */
export const SMALL_READ = 64 * 1024;
/**
 * Chunk size of larger reads: 1 MiB instead of the stream default of 64 KiB, so a large GET costs 16×
 * fewer thread-pool round trips, stream callbacks and socket writes per byte (bounded memory: one chunk
 * in flight per reader plus what the socket buffers).
 */
const LARGE_READ_CHUNK = 1024 * 1024;

/**
 * Blobs as files under `<dataDir>/blobs/ab/cd/<locator>`. A blob is written to a temp file in its
 * final directory, fsynced, checked, then renamed into place (rename is atomic), so a crash or an
 * aborted body never leaves a partial blob visible; the temp file is removed on every error.
 * Locators are generated hex ids and validated on every use: no path traversal is possible.
 */
export class FsBackend implements StorageBackend {
  readonly key = 'fs';
  readonly root: string;

  private readonly smallBlobs: SmallBlobCache | undefined;
  private readonly inline: InlineBlobs | undefined;
  private readonly directIo: boolean;

  /**
   * `smallBlobs`: keep the bytes of small blobs read whole in memory (see SmallBlobCache); `inline`:
   * keep small bodies in the metadata database instead of files (see InlineBlobs); `directIo`: write large
   * bodies past the page cache where the file system allows it (see FileSink; default true).
   */
  constructor(dataDir: string, opts: { smallBlobs?: SmallBlobCache; inline?: InlineBlobs; directIo?: boolean } = {}) {
    this.root = path.join(path.resolve(dataDir), 'blobs');
    this.smallBlobs = opts.smallBlobs;
    // Kept with a limit of 0 too: blobs written inline before are still read through it.
    this.inline = opts.inline;
    this.directIo = opts.directIo ?? true;
  }

  private pathOf(locator: string): string {
    if (!LOCATOR.test(locator)) throw new Error(`invalid blob locator ${JSON.stringify(locator)}`);
    if (locator.startsWith('p')) return path.join(this.root, 'parts', locator.slice(1, 3), locator);
    return path.join(this.root, locator.slice(0, 2), locator.slice(2, 4), locator);
  }

  put(body: Readable, opts: PutOptions & { unhashed: true }): Promise<StoredBlob>;
  put(body: Readable, opts?: PutOptions): Promise<HashedBlob>;
  async put(body: Readable, opts: PutOptions = {}): Promise<StoredBlob> {
    const inlineMax = this.inline?.maxBytes ?? 0;
    if (inlineMax > 0 && !opts.part && opts.expectedSize !== undefined && opts.expectedSize <= inlineMax) return this.readInline(body, opts);
    const prefix = opts.part ? 'p' : '';
    if (isLarge(opts.expectedSize)) {
      // Straight into the FileSink, which counts and limits (the counter's meter) and hashes on the MD5 thread.
      const { counter, verify } = bodyMeter(opts, false);
      const detached = detachedBody(body);
      return this.writeBlob(prefix, (sink) => detached.pipeTo(sink), counter, verify, true, !opts.unhashed);
    }
    const { source, counter, verify } = meteredBody(body, opts, !opts.unhashed);
    return this.writeBlob(prefix, (sink) => pipelineClosed(source, counter, sink), counter, verify, false, !opts.unhashed);
  }

  /** A small body read into memory and hashed, for the caller to commit with the blob's row. */
  private async readInline(body: Readable, opts: PutOptions): Promise<HashedBlob> {
    const { data, size, md5 } = await readSmallBody(body, opts);
    return { locator: `i${randomId()}`, size, md5, inline: data };
  }

  async compose(locators: string[], opts: { unhashed?: boolean } = {}): Promise<StoredBlob> {
    const paths = locators.map((l) => this.pathOf(l));
    async function* concatenated() {
      for (const p of paths) yield* createReadStream(p);
    }
    const counter = new HashingCounter(Number.MAX_SAFE_INTEGER, () => new S3Error('EntityTooLarge'), false);
    return this.writeBlob(
      '',
      (sink) => pipelineClosed(Readable.from(concatenated()), sink),
      counter,
      () => undefined,
      true,
      !opts.unhashed,
    );
  }

  private async writeBlob(
    locatorPrefix: string,
    /** Moves the body into the sink; settles once the sink has closed. */
    pump: (sink: Writable) => Promise<void>,
    counter: HashingCounter,
    verify: (size: number, md5: string | null) => void,
    /**
     * Large (or unknown) bodies go through a FileSink, which meters them with the counter (counting and
     * limiting only) and hashes them on the MD5 thread; small ones through a plain write stream, hashed
     * by the counter on the way.
     */
    large: boolean,
    /** false: the bytes are not hashed at all (PutOptions.unhashed); md5 null. */
    hashed = true,
  ): Promise<StoredBlob> {
    const locator = locatorPrefix + randomId();
    const finalPath = this.pathOf(locator);
    const dir = path.dirname(finalPath);
    const tempPath = `${finalPath}.${randomId().slice(0, 8)}${TEMP_SUFFIX}`;
    await mkdir(dir, { recursive: true });
    let md5Thread: ThreadMd5 | undefined;
    try {
      // fsync before close (flush / FileSink), so the rename below never publishes bytes still in the page cache only.
      md5Thread = large && hashed ? new ThreadMd5() : undefined;
      const sink = large
        ? new FileSink(tempPath, md5Thread, this.directIo, (chunk) => counter.meter(chunk))
        : createWriteStream(tempPath, { flags: 'wx', flush: true });
      // (The pump settles once the sink closed: on failure the temp file is created and closed by then, so the rm below is final.)
      await pump(sink);
      const md5 = !hashed ? null : md5Thread ? await md5Thread.digestHex() : counter.digestHex();
      verify(counter.size, md5);
      await rename(tempPath, finalPath);
      await fsyncDir(dir);
      return { locator, size: counter.size, md5 };
    } catch (err) {
      md5Thread?.drop();
      await rm(tempPath, { force: true });
      throw err;
    }
  }

  async get(locator: string, range?: ByteRange): Promise<Readable> {
    const cached = this.smallBlobs?.get(locator);
    if (cached) return oneChunk(range ? cached.subarray(range.start, range.end + 1) : cached);
    if (INLINE_LOCATOR.test(locator)) {
      const bytes = await this.inline?.load(locator);
      if (!bytes) throw new BlobMissingError(this.key, locator);
      this.smallBlobs?.set(locator, bytes);
      return oneChunk(range ? bytes.subarray(range.start, range.end + 1) : bytes);
    }
    const p = this.pathOf(locator);
    // Small objects (the common case) in one read with plain callbacks: open, read, close and a
    // one-chunk stream cost far less than a FileHandle read stream (which also reads once more for EOF).
    // Opened first, so that a missing blob is an error here, not later in the response stream.
    const start = range?.start ?? 0;
    const want = range ? Math.min(SMALL_READ, range.end - start + 1) : SMALL_READ;
    const fd = await new Promise<number>((resolve, reject) =>
      openFd(p, 'r', (err, fd) => (err?.code === 'ENOENT' ? reject(new BlobMissingError(this.key, locator)) : err ? reject(err) : resolve(fd))),
    );
    let n: number;
    const buf = Buffer.allocUnsafe(want);
    try {
      n = await new Promise<number>((resolve, reject) => readFd(fd, buf, 0, want, start, (err, bytes) => (err ? reject(err) : resolve(bytes))));
    } finally {
      closeFd(fd, () => undefined);
    }
    // Read from the start and ended short of what was asked: that is the whole blob.
    if (start === 0 && n < want) this.smallBlobs?.set(locator, buf.subarray(0, n));
    if (n < want || (range && start + n > range.end)) return oneChunk(buf.subarray(0, n));
    // Larger: read with several reads in flight (a file just written with O_DIRECT is read from the device).
    return new FileReadStream(await open(p, 'r'), range?.start ?? 0, range?.end, LARGE_READ_CHUNK);
  }

  async openFile(locator: string): Promise<FileHandle | undefined> {
    if (INLINE_LOCATOR.test(locator)) return undefined;
    return open(this.pathOf(locator), 'r').catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'ENOENT' ? new BlobMissingError(this.key, locator) : err;
    });
  }

  async delete(locator: string): Promise<void> {
    this.smallBlobs?.delete(locator);
    // An inline blob's bytes go with its database row (whoever frees the blob removes the row).
    if (INLINE_LOCATOR.test(locator)) return;
    await unlink(this.pathOf(locator)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  async exists(locator: string): Promise<boolean> {
    if (INLINE_LOCATOR.test(locator)) return (await this.inline?.load(locator)) !== undefined;
    return stat(this.pathOf(locator)).then(
      () => true,
      () => false,
    );
  }

  /** Part files older than `maxAgeMs`: their uploads expired unfinished (complete and abort remove their own). */
  async removeStaleParts(maxAgeMs: number): Promise<number> {
    let removed = 0;
    const partsDir = path.join(this.root, 'parts');
    for (const sub of await readdir(partsDir).catch(() => [] as string[])) {
      for (const name of await readdir(path.join(partsDir, sub)).catch(() => [] as string[])) {
        const p = path.join(partsDir, sub, name);
        const info = await stat(p).catch(() => undefined);
        if (info && Date.now() - info.mtimeMs >= maxAgeMs) {
          await rm(p, { force: true });
          removed++;
        }
      }
    }
    return removed;
  }

  /**
   * Every committed-or-not blob file (not parts, not temp files) with its last modification time, for
   * the orphan sweep (gc/cleanup-job.ts): a file no `blobs` row names is an orphan once old enough.
   */
  async *listBlobs(): AsyncIterable<{ locator: string; modifiedMs: number }> {
    const hex2 = /^[0-9a-f]{2}$/;
    for (const a of await readdir(this.root).catch(() => [] as string[])) {
      if (!hex2.test(a)) continue;
      for (const b of await readdir(path.join(this.root, a)).catch(() => [] as string[])) {
        if (!hex2.test(b)) continue;
        for (const name of await readdir(path.join(this.root, a, b)).catch(() => [] as string[])) {
          if (!/^[0-9a-f]{32}$/.test(name)) continue;
          const info = await stat(path.join(this.root, a, b, name)).catch(() => undefined);
          if (info?.isFile()) yield { locator: name, modifiedMs: info.mtimeMs };
        }
      }
    }
  }

  /** Temp files left by a crash (never visible as blobs) and older than `minAgeMs` are removed. */
  async removeStaleTempFiles(minAgeMs = 3_600_000): Promise<number> {
    let removed = 0;
    const walk = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.name.endsWith(TEMP_SUFFIX)) {
          const info = await stat(p).catch(() => undefined);
          if (info && Date.now() - info.mtimeMs >= minAgeMs) {
            await rm(p, { force: true });
            removed++;
          }
        }
      }
    };
    await walk(this.root);
    return removed;
  }
}

/** A stream of one buffer, ended (cheaper than Readable.from, which iterates asynchronously). */
function oneChunk(chunk: Buffer): Readable {
  const stream = new Readable({ read: () => undefined });
  if (chunk.length) stream.push(chunk);
  stream.push(null);
  return stream;
}

/** Bodies of at least one FileSink buffer, or of unknown size, take the large-body path. */
function isLarge(expectedSize: number | undefined): boolean {
  return expectedSize === undefined || expectedSize >= FILE_SINK_BUFFER;
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
