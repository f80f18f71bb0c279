import { Transform, type TransformCallback } from 'node:stream';
import { CHUNK, NONCE_PREFIX_BYTES, tampered, TAG_BYTES, type PlainWindow } from './chunked-aead.js';
import type { PoolStream } from './crypto-pool.js';
import { BATCH_CHUNKS, BATCHES_IN_FLIGHT, plaintextOf, threadLane, type ThreadedRead } from './crypto-threads.js';

const BATCH_BYTES = BATCH_CHUNKS * (CHUNK + TAG_BYTES);
/** Shared batch buffers kept for reuse across reads. */
const pool: Buffer[] = [];

/**
 * SegmentDecryptor's contract (chunked-aead.ts) for stored bytes that come as a stream (a remote store; a
 * file is read by the threads themselves: file-segment-decryptor.ts), with the deciphering on the encryption threads
 * (crypto-pool.ts: fair per tenant and per stream; AES-GCM costs about as much CPU per MiB as the rest of
 * a large GET on the event loop, so on its own threads it runs beside it). Stored bytes are copied into
 * pooled shared batches of whole chunks that a thread reads in place; the plaintext comes back
 * transferred, not copied. The
 * stored bytes of the window's chunks in, from its first (after the nonce prefix when that is given, else
 * with it), the window's plaintext out, in order, each batch only once every tag in it verified; a short or altered stream fails. Meant for large reads (small ones cost less
 * deciphered in place than a round trip to the thread).
 */
export class ThreadedSegmentDecryptor extends Transform {
  private prefixParts: Buffer[] = [];
  private next: number;
  private readonly window: PlainWindow;
  /** The batch filling: its buffer, bytes in it, its chunks complete so far and the bytes they span. */
  private batch: Buffer | undefined;
  private filled = 0;
  private whole = 0;
  private wholeBytes = 0;
  /** Batches sent, oldest first: their plaintext to come, and their buffer to give back. */
  private readonly inFlight: Array<{ plain: Promise<Buffer>; buffer: Buffer }> = [];
  private readonly spare: Buffer[] = [];
  private readonly lane: PoolStream;
  private readonly keyBytes: Uint8Array;

  constructor(
    private prefix: Buffer | undefined,
    read: ThreadedRead,
  ) {
    super();
    ({ lane: this.lane, keyBytes: this.keyBytes } = threadLane(read));
    this.window = read.window;
    this.next = read.window.first;
  }

  private storedSizeOf(index: number): number {
    const { count, plain } = this.window;
    return (index === count - 1 ? plain - index * CHUNK : CHUNK) + TAG_BYTES;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    let at = 0;
    if (this.prefix === undefined) {
      const need = NONCE_PREFIX_BYTES - this.prefixParts.reduce((n, b) => n + b.length, 0);
      this.prefixParts.push(chunk.subarray(0, need));
      at = Math.min(need, chunk.length);
      if (at < need) {
        done();
        return;
      }
      this.prefix = Buffer.concat(this.prefixParts);
    }
    this.gather(chunk, at).then(() => done(), done);
  }

  /** Copy stored bytes into batches, sending each once it holds BATCH_CHUNKS whole chunks (or the last one needed). */
  private async gather(chunk: Buffer, from: number): Promise<void> {
    for (let at = from; at < chunk.length && this.next + this.whole <= this.window.last; ) {
      if (!this.batch) {
        while (this.inFlight.length >= BATCHES_IN_FLIGHT) await this.passOldest();
        this.batch = this.spare.pop() ?? pool.pop() ?? Buffer.from(new SharedArrayBuffer(BATCH_BYTES));
      }
      const target = this.wholeBytes + this.storedSizeOf(this.next + this.whole);
      const n = Math.min(chunk.length - at, target - this.filled);
      this.batch.fill(chunk.subarray(at, at + n), this.filled, this.filled + n);
      this.filled += n;
      at += n;
      if (this.filled === target) {
        this.whole++;
        this.wholeBytes = target;
        if (this.whole === BATCH_CHUNKS || this.next + this.whole > this.window.last) this.send();
      }
    }
  }

  private send(): void {
    if (!this.batch || this.whole === 0) return;
    const buffer = this.batch;
    const first = this.next;
    const n = this.whole;
    const { count, plain } = this.window;
    const lastBody = first + n === count ? plain - (count - 1) * CHUNK : CHUNK;
    const deciphered = this.lane
      .run({
        op: 'open',
        shared: buffer.buffer,
        length: this.wholeBytes,
        key: this.keyBytes,
        prefix: new Uint8Array(this.prefix!),
        plain,
        count,
        first,
        n,
        plainBytes: (n - 1) * CHUNK + lastBody,
      })
      .then(plaintextOf);
    deciphered.catch(() => undefined);
    this.inFlight.push({ plain: deciphered, buffer });
    this.next += this.whole;
    this.batch = undefined;
    this.filled = this.whole = this.wholeBytes = 0;
  }

  /** Wait for the oldest batch, pass on the bytes of it that were asked for, and free its buffer. */
  private async passOldest(): Promise<void> {
    const { plain, buffer } = this.inFlight.shift()!;
    let bytes: Buffer;
    try {
      bytes = await plain;
    } finally {
      this.spare.push(buffer);
    }
    const piece = this.window.cut(bytes);
    if (piece.length) this.push(piece);
  }

  override _flush(done: TransformCallback): void {
    (async () => {
      // Bytes of an incomplete chunk left over: the stream was cut short (send() ignores them; the check below fails).
      this.send();
      while (this.inFlight.length) await this.passOldest();
      if (this.window.missing > 0) throw tampered();
    })().then(() => done(), done);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.lane.close();
    // The thread may still read a batch: its buffer goes back to the pool only once it answered.
    const inFlight = this.inFlight.splice(0);
    Promise.allSettled(inFlight.map((b) => b.plain)).then(() => {
      for (const buf of [...this.spare.splice(0), ...inFlight.map((b) => b.buffer), ...(this.batch ? [this.batch] : [])]) if (pool.length < 8) pool.push(buf);
      this.batch = undefined;
      callback(error);
    }, callback);
  }
}
