import { randomBytes } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { S3Error } from '../../../object-model/src/index.js';
import type { ThreadMd5 } from '../backends/md5-thread.js';
import { CHUNK, chunkCount, NONCE_PREFIX_BYTES } from './chunked-aead.js';
import { BATCH_CHUNKS, BATCHES_IN_FLIGHT, cryptoPool } from './crypto-threads.js';
import type { CryptoPool, PoolStream } from './crypto-pool.js';

const BATCH_BYTES = BATCH_CHUNKS * CHUNK;
/** Shared batch buffers kept for reuse across uploads (one is freed only once every thread let go of it). */
const pool: Buffer[] = [];

/**
 * SegmentEncryptor's contract (chunked-aead.ts) with the enciphering on the encryption threads
 * (crypto-pool.ts): plaintext in, one segment out (nonce prefix, then each chunk enciphered with its tag),
 * in order; `beforeFinal` runs before the last chunk is sealed (a check that may fail the stream).
 * Plaintext is copied once, into pooled 1 MiB shared batches that the threads read in place; `md5`, when
 * given, hashes the same batches in place on the MD5 thread (no copy of its own). A batch holding the
 * segment's last chunk is sealed only once the body ended and `beforeFinal` held; with the size unknown
 * a full batch waits until more bytes show it is not the last. Meant for large bodies (small ones cost
 * less enciphered in place than a round trip to a thread).
 */
export class ThreadedSegmentEncryptor extends Transform {
  private readonly prefix = randomBytes(NONCE_PREFIX_BYTES);
  private readonly count: number | undefined;
  private readonly lane: PoolStream;
  /** The batch filling, the bytes in it and the index of its first chunk. */
  private batch: Buffer | undefined;
  private filled = 0;
  private first = 0;
  private seen = 0;
  /** Batches sent, oldest first: their ciphertext to come, their hashing, and their buffer to give back. */
  private readonly inFlight: Array<{ sealed: Promise<Buffer>; hashed: Promise<void>; buffer: Buffer }> = [];
  private readonly spare: Buffer[] = [];
  /** Key and prefix as the threads are sent them: copies of their own (a pooled Buffer's whole slab would be cloned). */
  private readonly sent: { key: Uint8Array; prefix: Uint8Array };

  constructor(
    key: Buffer,
    private readonly beforeFinal: () => void | Promise<void> = () => undefined,
    private readonly plainSize?: number,
    tenant = '',
    private readonly md5?: ThreadMd5,
    threads: CryptoPool = cryptoPool(),
  ) {
    super({ highWaterMark: BATCH_BYTES });
    this.count = plainSize === undefined ? undefined : chunkCount(plainSize);
    this.lane = threads.stream(tenant);
    this.sent = { key: new Uint8Array(key), prefix: new Uint8Array(this.prefix) };
    this.push(this.prefix);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.seen += chunk.length;
    if (this.plainSize !== undefined && this.seen > this.plainSize) {
      done(new S3Error('InvalidRequest', 'the body is longer than its Content-Length'));
      return;
    }
    this.gather(chunk).then(() => done(), done);
  }

  private async gather(chunk: Buffer): Promise<void> {
    for (let at = 0; at < chunk.length; ) {
      // A full batch held back (it might have been the last): more bytes came, so it is not.
      if (this.batch && this.filled === BATCH_BYTES) this.send(false);
      if (!this.batch) {
        while (this.inFlight.length >= BATCHES_IN_FLIGHT) await this.passOldest();
        this.batch = this.spare.pop() ?? pool.pop() ?? Buffer.from(new SharedArrayBuffer(BATCH_BYTES));
      }
      const n = Math.min(chunk.length - at, BATCH_BYTES - this.filled);
      // fill() with a Buffer is one native memcpy (see FileSink.append).
      this.batch.fill(n === chunk.length ? chunk : chunk.subarray(at, at + n), this.filled, this.filled + n);
      this.filled += n;
      at += n;
      // With the size known, a full batch before the last chunk goes at once.
      if (this.filled === BATCH_BYTES && this.count !== undefined && this.first + BATCH_CHUNKS < this.count) this.send(false);
    }
  }

  /** Hash (unless `hashed` already) and seal the batch filling; `final`: it ends the segment. */
  private send(final: boolean, hashed?: Promise<void>): void {
    const buffer = this.batch ?? this.spare.pop() ?? pool.pop() ?? Buffer.from(new SharedArrayBuffer(BATCH_BYTES));
    const length = this.filled;
    const bytes = buffer.subarray(0, length);
    const hashing = hashed ?? (this.md5 && length > 0 ? this.md5.update(bytes) : Promise.resolve());
    const sealed = this.lane
      .run({ op: 'seal', shared: buffer.buffer, length, ...this.sent, first: this.first, final })
      .then((answer) => Buffer.from(answer.sealed as ArrayBuffer));
    sealed.catch(() => undefined);
    hashing.catch(() => undefined);
    this.inFlight.push({ sealed, hashed: hashing, buffer });
    this.first += Math.ceil(length / CHUNK);
    this.batch = undefined;
    this.filled = 0;
  }

  /** Wait for the oldest batch, pass its ciphertext on, and free its buffer once both threads are done with it. */
  private async passOldest(): Promise<void> {
    const { sealed, hashed, buffer } = this.inFlight.shift()!;
    const settled = await Promise.allSettled([sealed, hashed]);
    this.spare.push(buffer);
    for (const s of settled) if (s.status === 'rejected') throw s.reason;
    this.push((settled[0] as PromiseFulfilledResult<Buffer>).value);
  }

  override _flush(done: TransformCallback): void {
    (async () => {
      // The last bytes are hashed first: the check (the MD5 of the whole body) runs before the last chunk is sealed.
      const hashed = this.md5 && this.filled > 0 ? this.md5.update(this.batch!.subarray(0, this.filled)) : Promise.resolve();
      hashed.catch(() => undefined);
      await hashed;
      await this.beforeFinal();
      // (A shorter body fails its size check in beforeFinal; this guards the layout regardless.)
      if (this.plainSize !== undefined && this.seen !== this.plainSize) throw new S3Error('IncompleteBody');
      this.send(true, hashed);
      while (this.inFlight.length) await this.passOldest();
    })().then(() => done(), done);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.lane.close();
    // The threads may still read a batch: its buffer goes back to the pool only once they are done.
    const inFlight = this.inFlight.splice(0);
    Promise.allSettled(inFlight.flatMap((b) => [b.sealed, b.hashed])).then(() => {
      for (const buf of [...this.spare.splice(0), ...inFlight.map((b) => b.buffer), ...(this.batch ? [this.batch] : [])]) if (pool.length < 8) pool.push(buf);
      this.batch = undefined;
      callback(error);
    }, callback);
  }
}
