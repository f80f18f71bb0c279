import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { CHUNK, NONCE_PREFIX_BYTES, tampered, TAG_BYTES, type PlainWindow } from './chunked-aead.js';
import type { PoolStream } from './crypto-pool.js';
import { BATCH_CHUNKS, BATCHES_IN_FLIGHT, plaintextOf, threadLane, type ThreadedRead } from './crypto-threads.js';

/**
 * SegmentDecryptor's contract (chunked-aead.ts) for a segment stored in a file: the encryption threads
 * (crypto-pool.ts, fair per tenant and per stream) read the chunks themselves from the open file (pread at
 * their offsets), verify and decipher them, and send the plaintext back transferred, so the event loop
 * never touches a stored byte: it only passes plaintext on. The window's plaintext out, in order, each
 * batch only once every tag in it verified; a short file or an altered chunk
 * fails the stream.
 *
 * At most BATCHES_IN_FLIGHT batches (about 1 MiB each) are asked for or answered and not yet passed on:
 * a reader that stops reading stops the reads. The file is this stream's: it is closed when the stream
 * ends or is destroyed, once no thread still reads it (a job answered or dropped from the queue).
 */
export class FileSegmentDecryptor extends Readable {
  private next: number;
  private readonly window: PlainWindow;
  /** Batches asked for, oldest first: their plaintext to come. */
  private readonly batches: Array<Promise<Buffer>> = [];
  private delivering = false;
  private readonly lane: PoolStream;
  private readonly keyBytes: Uint8Array;

  /** `storedAt`: where the segment starts in the file (its nonce prefix). */
  constructor(
    private readonly file: FileHandle,
    private readonly storedAt: number,
    read: ThreadedRead,
  ) {
    super();
    ({ lane: this.lane, keyBytes: this.keyBytes } = threadLane(read));
    this.window = read.window;
    this.next = read.window.first;
  }

  /**
   * The segment's nonce prefix, read once here (8 bytes), so that each job reads only its chunks: reads in
   * ascending order, which the kernel's read-ahead follows (a jump back to the prefix per job defeats it).
   */
  private prefix: Uint8Array | undefined;

  override _read(): void {
    if (this.delivering) return;
    this.delivering = true;
    this.deliver().then(
      () => (this.delivering = false),
      (err: Error) => this.destroy(err),
    );
  }

  /** Pass on batches in order until the reader has enough (push answers false) or the range is done. */
  private async deliver(): Promise<void> {
    if (!this.prefix) {
      const prefix = new Uint8Array(NONCE_PREFIX_BYTES);
      const { bytesRead } = await this.file.read(prefix, 0, NONCE_PREFIX_BYTES, this.storedAt);
      if (bytesRead < NONCE_PREFIX_BYTES) throw tampered();
      this.prefix = prefix;
      if (this.destroyed) return;
    }
    for (;;) {
      this.ask();
      if (this.batches.length === 0) {
        if (this.window.missing > 0) throw tampered();
        this.push(null);
        return;
      }
      const bytes = await this.batches[0]!;
      this.batches.shift();
      if (this.destroyed) return;
      const piece = this.window.cut(bytes);
      if (piece.length > 0 && !this.push(piece)) {
        this.ask();
        return;
      }
    }
  }

  /** Ask the threads for the next batches, up to BATCHES_IN_FLIGHT not yet passed on. */
  private ask(): void {
    const { storedAt } = this;
    const { count, plain } = this.window;
    // (Destroyed from a 'data' handler within push: nothing more is asked.)
    while (!this.destroyed && this.batches.length < BATCHES_IN_FLIGHT && this.next <= this.window.last) {
      const first = this.next;
      const n = Math.min(BATCH_CHUNKS, this.window.last - first + 1);
      const lastBody = first + n === count ? plain - (count - 1) * CHUNK : CHUNK;
      const answer = this.lane
        .run({
          op: 'read',
          fd: this.file.fd,
          prefix: this.prefix,
          at: storedAt + NONCE_PREFIX_BYTES + first * (CHUNK + TAG_BYTES),
          length: (n - 1) * (CHUNK + TAG_BYTES) + lastBody + TAG_BYTES,
          key: this.keyBytes,
          plain,
          count,
          first,
          n,
          plainBytes: (n - 1) * CHUNK + lastBody,
        })
        .then(plaintextOf);
      answer.catch(() => undefined);
      this.batches.push(answer);
      this.next += n;
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // Jobs still queued are dropped; one a thread holds may still read the file: it is closed after.
    this.lane.close();
    const asked = this.batches.splice(0);
    Promise.allSettled(asked)
      .then(() => this.file.close())
      .then(
        () => callback(error),
        (err: Error) => callback(error ?? err),
      );
  }
}
