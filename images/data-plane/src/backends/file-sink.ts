import { close, constants, fsync, ftruncate, open, write } from 'node:fs';
import { Writable } from 'node:stream';
import type { ThreadMd5 } from './md5-thread.js';

/** Size of each write() to the file: incoming chunks (64 KiB socket reads) are gathered into buffers this large. */
export const FILE_SINK_BUFFER = 1024 * 1024;

/**
 * Direct I/O (O_DIRECT) asks for the memory address, the file offset and the length of every write to
 * be multiples of the device's logical block size; 4 KiB covers every common one. Full buffers are
 * 1 MiB at 1 MiB offsets; the last, partial one is padded to this and the file cut back to its size.
 */
const ALIGN = 4096;

/**
 * Buffers per sink: one filling while the others are written and hashed side by side. Eight (not four):
 * on a busy host each thread runs in slices between others' (see hack/bench/measurements.md, branch
 * large), and the MD5 thread, the serial part, must find bytes queued while the event loop waits for
 * its next slice.
 */
const RING = 8;

/**
 * A FileSink buffer: FILE_SINK_BUFFER bytes of shared memory (a SharedArrayBuffer, so that the MD5 thread
 * reads them in place). JavaScript cannot align memory, so each is allocated ALIGN bytes longer and
 * `bytes` starts where a direct write is accepted (found once per buffer by trying; see alignedStart).
 */
interface SinkBuffer {
  readonly shared: Buffer;
  bytes: Buffer;
  /** Whether `bytes` is known to suit direct writes (false: not tried yet, or none did). */
  direct: boolean;
}

/**
 * Buffers come from one small pool, reused across uploads, so that neither thread allocates per upload
 * (a shared buffer is only freed once both threads have collected their handles to it), and the
 * alignment of each is found once. At most POOLED are kept; more concurrent uploads allocate their own.
 */
const POOLED = 16;
const pool: SinkBuffer[] = [];

function newBuffer(): SinkBuffer {
  const shared = Buffer.from(new SharedArrayBuffer(FILE_SINK_BUFFER + ALIGN));
  return { shared, bytes: shared.subarray(0, FILE_SINK_BUFFER), direct: false };
}

function giveBack(buf: SinkBuffer): void {
  if (pool.length < POOLED) pool.push(buf);
}

/** No start of a buffer suits direct writes (the device's blocks are larger than ALIGN). */
class NoAlignedStart extends Error {
  constructor() {
    super('no start of the buffer suits direct writes');
  }
}

/** Set once direct writes failed where they were expected to work: this process then writes through the page cache. */
let directUnavailable = !constants.O_DIRECT;

/**
 * Where in `buf.shared` a direct write to `fd` (opened with O_DIRECT) is accepted: writes one ALIGN block
 * of zeros from each 16-byte step (allocations are 16-byte aligned) at file offset `at` until the kernel
 * takes one (a misaligned address answers EINVAL at once, without I/O). `at` is where the buffer's own
 * bytes will go: their write, or the final truncation, replaces the block; writes in flight are all
 * before it. Undefined when no start is accepted.
 */
async function alignedStart(fd: number, buf: SinkBuffer, at: number): Promise<number | undefined> {
  // A large allocation is usually its own mmap with a 16-byte header: try that start first.
  const candidates = [ALIGN - 16];
  for (let step = 0; step < ALIGN; step += 16) if (step !== ALIGN - 16) candidates.push(step);
  for (const start of candidates) {
    buf.shared.fill(0, start, start + ALIGN);
    const accepted = await new Promise<boolean>((resolve, reject) =>
      write(fd, buf.shared, start, ALIGN, at, (err) => {
        if (!err) resolve(true);
        else if (err.code === 'EINVAL') resolve(false);
        else reject(err);
      }),
    );
    if (accepted) return start;
  }
  return undefined;
}

/**
 * A file writer for large bodies. It copies incoming chunks into a ring of reused 1 MiB buffers and
 * hands each full one to the file (one write()) and to the MD5 thread while the next fills, then fsyncs
 * before close (as `createWriteStream(path, { flush: true })` does). Compared with a write stream of the
 * socket's 64 KiB chunks it makes 16× fewer thread-pool round trips, and the socket's buffers are
 * released as soon as they are copied instead of waiting in the write queue (where they outlived
 * young-generation collections and, promoted, drove frequent full garbage collections).
 *
 * Writes are direct (O_DIRECT) where the file system takes them, as MinIO writes large objects: the
 * bytes go from the buffer to the device without a copy into the page cache (after the MD5, the largest
 * CPU cost of a large PUT: hack/adr/0004-direct-io-large-bodies.md), and the fsync has no dirty pages
 * left to write. `direct: false` (or a file system
 * without O_DIRECT) writes through the page cache. Creates the file (`wx`) at construction, so an empty
 * body still yields an (empty, fsynced) file.
 */
export class FileSink extends Writable {
  private fd: number | undefined;
  /** Whether `fd` was opened with O_DIRECT. */
  private directFd = false;
  /** The ring of buffers, each taken when first needed. */
  private readonly buffers: SinkBuffer[] = [];
  /** Per ring slot: the write (and hashing) of its bytes still in flight, if any. */
  private readonly inFlight: Array<Promise<void> | undefined> = [];
  private current = 0;
  private filled = 0;
  private position = 0;

  /**
   * `md5`: given every byte written, in order (the MD5 of a large body is computed on its own thread,
   * reading this sink's buffers in place while the file write of the same bytes runs). `meter`: sees
   * every chunk before it is taken (counting, a size limit); what it throws fails the write.
   */
  constructor(
    private readonly path: string,
    private readonly md5?: ThreadMd5,
    private readonly direct = true,
    private readonly meter?: (chunk: Buffer) => void,
  ) {
    super({ highWaterMark: FILE_SINK_BUFFER });
  }

  override _construct(callback: (error?: Error | null) => void): void {
    this.openFile().then(() => callback(), callback);
  }

  /**
   * Open the file, direct where the file system and this process's memory allow: a file system without
   * direct I/O (e.g. tmpfs before Linux 6.6) refuses the flag, and a device whose blocks are larger than
   * ALIGN refuses every start of the first buffer; both open the file through the page cache instead,
   * and so does every later sink of this process.
   */
  private async openFile(): Promise<void> {
    const openAs = (flags: number | string) =>
      new Promise<number>((resolve, reject) => open(this.path, flags, 0o666, (err, fd) => (err ? reject(err) : resolve(fd))));
    if (this.direct && !directUnavailable) {
      try {
        this.fd = await openAs(constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_DIRECT);
        this.directFd = true;
        await this.takeBuffer();
        return;
      } catch (err) {
        // Only these two say direct writes cannot work here; anything else (EEXIST, EIO…) fails this upload alone.
        const refused = this.directFd ? err instanceof NoAlignedStart : (err as NodeJS.ErrnoException).code === 'EINVAL';
        if (!refused) throw err;
        directUnavailable = true;
      }
      // Nothing was written (the probe's block aside): the same file, emptied, through the page cache.
      const fd = this.fd;
      this.directFd = false;
      this.fd = await openAs(fd === undefined ? 'wx' : 'w');
      if (fd !== undefined) close(fd, () => undefined);
      return;
    }
    this.fd = await openAs('wx');
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (error?: Error | null) => void): void {
    try {
      this.meter?.(chunk);
    } catch (err) {
      callback(err as Error);
      return;
    }
    this.append(chunk).then(() => callback(), callback);
  }

  private async append(chunk: Buffer): Promise<void> {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.filled === 0) await this.settle(this.current);
      const buf = this.buffers[this.current] ?? (await this.takeBuffer());
      const n = Math.min(chunk.length - offset, buf.bytes.length - this.filled);
      // fill() with a Buffer value is one native memcpy; copy() into shared memory is V8's relaxed
      // word-by-word move, which took the HTTP thread ~4× the time of the same bytes' plain copy.
      buf.bytes.fill(n === chunk.length ? chunk : chunk.subarray(offset, offset + n), this.filled, this.filled + n);
      this.filled += n;
      offset += n;
      if (this.filled === buf.bytes.length) this.flushCurrent();
    }
  }

  /**
   * A buffer for the current slot; on a direct descriptor, one whose start direct writes accept. Only
   * the first buffer can find none (see openFile): once one did, blocks are at most ALIGN and every
   * 16-byte aligned allocation has such a start.
   */
  private async takeBuffer(): Promise<SinkBuffer> {
    const buf = pool.pop() ?? newBuffer();
    this.buffers[this.current] = buf;
    if (this.directFd && !buf.direct) {
      // Every earlier buffer was full: the position is a multiple of FILE_SINK_BUFFER, so of ALIGN.
      const start = await alignedStart(this.fd!, buf, this.position);
      if (start === undefined) throw new NoAlignedStart();
      buf.bytes = buf.shared.subarray(start, start + FILE_SINK_BUFFER);
      buf.direct = true;
    }
    return buf;
  }

  /** Wait until slot `i`'s buffer is free again (its write and hashing done); rethrows their failure. */
  private async settle(i: number): Promise<void> {
    const pending = this.inFlight[i];
    if (!pending) return;
    this.inFlight[i] = undefined;
    await pending;
  }

  /** Hand the current buffer to the file and the MD5 thread, and move on to the next slot of the ring. */
  private flushCurrent(): void {
    if (this.filled === 0) return;
    const buf = this.buffers[this.current].bytes;
    const length = this.filled;
    const position = this.position;
    this.position += length;
    // A direct write of a partial (last) buffer is padded to the block; _final cuts the file back.
    const writeLength = this.directFd ? Math.ceil(length / ALIGN) * ALIGN : length;
    if (writeLength > length) buf.fill(0, length, writeLength);
    // Writes at distinct offsets may run side by side on the thread pool; hashing takes the buffers in order.
    const write = writeAll(this.fd!, buf, writeLength, position);
    const pending = this.md5 ? bothSettled(write, this.md5.update(buf.subarray(0, length))) : write;
    // A failure surfaces when the slot is reused or at the end; keep it from being an unhandled rejection meanwhile.
    pending.catch(() => undefined);
    this.inFlight[this.current] = pending;
    this.current = (this.current + 1) % RING;
    this.filled = 0;
  }

  /** Wait for every write and hashing in flight; rethrows the first failure. */
  private async settleAll(): Promise<void> {
    let failure: unknown;
    for (let i = 0; i < RING; i++) await this.settle(i).catch((err: unknown) => (failure ??= err));
    if (failure !== undefined) throw failure;
  }

  override _final(callback: (error?: Error | null) => void): void {
    (async () => {
      this.flushCurrent();
      await this.settleAll();
      const fd = this.fd!;
      // Direct writes: the padding of the last block (and of an alignment probe) goes.
      if (this.directFd) await new Promise<void>((resolve, reject) => ftruncate(fd, this.position, (err) => (err ? reject(err) : resolve())));
      await new Promise<void>((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
    })().then(() => callback(), callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const done = () => {
      const fd = this.fd;
      this.fd = undefined;
      // Nothing reads or writes the buffers any more: back to the pool.
      for (const buf of this.buffers.splice(0)) giveBack(buf);
      if (fd === undefined) {
        callback(error);
        return;
      }
      close(fd, (err) => callback(error ?? err));
    };
    // Never close the descriptor under a write still in flight.
    this.settleAll().then(done, done);
  }
}

/** Settles once both have (never earlier, so no descriptor is closed under a running write); rejects with the first error. */
async function bothSettled(a: Promise<void>, b: Promise<void>): Promise<void> {
  const [ra, rb] = await Promise.allSettled([a, b]);
  if (ra.status === 'rejected') throw ra.reason;
  if (rb.status === 'rejected') throw rb.reason;
}

function writeAll(fd: number, buf: Buffer, length: number, position: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (offset: number) =>
      write(fd, buf, offset, length - offset, position + offset, (err, written) => {
        if (err) reject(err);
        else if (offset + written < length) step(offset + written);
        else resolve();
      });
    step(0);
  });
}
