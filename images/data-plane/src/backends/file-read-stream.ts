import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';

/**
 * A large blob file read with several reads in flight (`depth`, each `chunk` bytes at its own offset), its
 * chunks pushed in file order. A file just written with O_DIRECT (ADR 0004) is not in the page cache: one
 * read at a time, the device answered such a file at ~0.6 GB/s here, four at once at ~1.2 GB/s. Each chunk is
 * a buffer of its own (consumers may hold chunks by reference, ADR 0002). Reads stop while the consumer is
 * behind (backpressure); the file is closed at the end, on error or destroy, once no read is in flight.
 */
export class FileReadStream extends Readable {
  private readonly reads: Array<Promise<Buffer>> = [];
  private next: number;
  private last = -1;
  private sized: Promise<void> | undefined;
  private pumping = false;

  /** Bytes `start` to `end` (inclusive; default: to the end of the file). */
  constructor(
    private readonly handle: FileHandle,
    start = 0,
    private end?: number,
    private readonly chunk = 1024 * 1024,
    private readonly depth = 4,
  ) {
    super({ highWaterMark: chunk * depth });
    this.next = start;
  }

  override _read(): void {
    if (this.pumping) return;
    this.pumping = true;
    this.pump().then(
      () => (this.pumping = false),
      (err: unknown) => this.destroy(err as Error),
    );
  }

  /** Keep `depth` reads in flight, and push completed ones in order while the consumer takes them. */
  private async pump(): Promise<void> {
    this.sized ??= this.end === undefined ? this.handle.stat().then((s) => void (this.last = s.size - 1)) : Promise.resolve(void (this.last = this.end));
    await this.sized;
    // Destroyed meanwhile: the file is closed or closing, and no read may start on it.
    if (this.destroyed) return;
    for (;;) {
      while (this.reads.length < this.depth && this.next <= this.last) {
        const at = this.next;
        const length = Math.min(this.chunk, this.last - at + 1);
        this.next += length;
        const read = this.readAt(at, length);
        // A read behind the head may fail before it is awaited: its error comes when its turn does, not as an
        // unhandled rejection meanwhile.
        read.catch(() => undefined);
        this.reads.push(read);
      }
      const head = this.reads[0];
      if (!head) {
        this.push(null);
        return;
      }
      const buf = await head;
      this.reads.shift();
      if (this.destroyed) return;
      // A file cut short under us (it never is: blobs do not change) ends the stream where it ends.
      if (buf.length === 0) {
        this.next = this.last + 1;
        this.reads.length = 0;
        this.push(null);
        return;
      }
      if (!this.push(buf)) return;
    }
  }

  private async readAt(position: number, length: number): Promise<Buffer> {
    const buf = Buffer.allocUnsafe(length);
    const { bytesRead } = await this.handle.read(buf, 0, length, position);
    return bytesRead === length ? buf : buf.subarray(0, bytesRead);
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    // Reads in flight finish before the descriptor goes (a closed fd's number may be reused meanwhile).
    Promise.allSettled(this.reads)
      .then(() => this.handle.close())
      .then(
        () => callback(err),
        (closeErr: unknown) => callback(err ?? (closeErr as Error)),
      );
  }
}
