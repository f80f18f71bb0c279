import { close, fsync, open, write } from 'node:fs';
import { Writable } from 'node:stream';
import type { ThreadMd5 } from './md5-thread.js';

/** Size of each write() to the file: incoming chunks (64 KiB socket reads) are gathered into buffers this large. */
export const FILE_SINK_BUFFER = 1024 * 1024;

/**
 * Buffers of every FileSink come from one small pool: shared memory (SharedArrayBuffer), so that the MD5
 * thread reads them in place, and reused across uploads, so that neither thread allocates per upload
 * (a shared buffer is only freed once both threads have collected their handles to it). At most
 * POOLED buffers are kept; more concurrent uploads allocate their own.
 */
const POOLED = 8;
const pool: Buffer[] = [];

function takeBuffer(): Buffer {
  return pool.pop() ?? Buffer.from(new SharedArrayBuffer(FILE_SINK_BUFFER));
}

function giveBack(buf: Buffer): void {
  if (pool.length < POOLED) pool.push(buf);
}

/**
 * A file writer for large bodies: it copies incoming chunks into two reused 1 MiB buffers and writes
 * each full buffer with one write() while the next one fills, then fsyncs before close (as
 * `createWriteStream(path, { flush: true })` does). Compared with a write stream of the socket's
 * 64 KiB chunks it makes 16× fewer thread-pool round trips, and the socket's buffers are released as
 * soon as they are copied instead of waiting in the write queue (where they outlived young-generation
 * collections and, promoted, drove frequent full garbage collections). Creates the file (`wx`) lazily
 * on the first write or at the end, so an empty body still yields an (empty, fsynced) file.
 */
export class FileSink extends Writable {
  private fd: number | undefined;
  /** Allocated when first needed. */
  private readonly buffers: Buffer[] = [];
  private current = 0;
  private filled = 0;
  private position = 0;
  /** The write in flight (of the other buffer), if any. */
  private inFlight: Promise<void> | undefined;

  /**
   * `md5`: given every byte written, in order (the MD5 of a large body is computed on its own thread,
   * reading this sink's buffers in place while the file write of the same bytes runs).
   */
  constructor(private readonly path: string, private readonly md5?: ThreadMd5) {
    super({ highWaterMark: FILE_SINK_BUFFER });
  }

  override _construct(callback: (error?: Error | null) => void): void {
    open(this.path, 'wx', (err, fd) => {
      if (err) {
        callback(err);
        return;
      }
      this.fd = fd;
      callback();
    });
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.append(chunk, 0).then(() => callback(), callback);
  }

  private async append(chunk: Buffer, from: number): Promise<void> {
    let offset = from;
    while (offset < chunk.length) {
      const buf = (this.buffers[this.current] ??= takeBuffer());
      const n = chunk.copy(buf, this.filled, offset);
      this.filled += n;
      offset += n;
      if (this.filled === buf.length) await this.flushCurrent();
    }
  }

  /** Hand the current buffer to the file (after the previous write finished) and switch to the other one. */
  private async flushCurrent(): Promise<void> {
    if (this.inFlight) await this.inFlight;
    this.inFlight = undefined;
    if (this.filled === 0) return;
    const buf = this.buffers[this.current];
    const length = this.filled;
    const position = this.position;
    this.position += length;
    this.current ^= 1;
    this.filled = 0;
    // The buffer is reused once both the file and the MD5 thread are done with it.
    const write = writeAll(this.fd!, buf, length, position);
    this.inFlight = this.md5 ? bothSettled(write, this.md5.update(buf.subarray(0, length))) : write;
    // A failed write surfaces at the next flush or at the end; keep it from being an unhandled rejection meanwhile.
    this.inFlight.catch(() => undefined);
  }

  override _final(callback: (error?: Error | null) => void): void {
    (async () => {
      await this.flushCurrent();
      if (this.inFlight) await this.inFlight;
      this.inFlight = undefined;
      await new Promise<void>((resolve, reject) => fsync(this.fd!, (err) => (err ? reject(err) : resolve())));
    })().then(() => callback(), callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const fd = this.fd;
    this.fd = undefined;
    const done = () => {
      // Nothing reads or writes the buffers any more: back to the pool.
      for (const buf of this.buffers.splice(0)) giveBack(buf);
      if (fd === undefined) {
        callback(error);
        return;
      }
      close(fd, (err) => callback(error ?? err));
    };
    // Never close the descriptor under a write still in flight.
    if (this.inFlight) this.inFlight.then(done, done);
    else done();
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
