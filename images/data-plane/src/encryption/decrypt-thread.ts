import { Transform, type TransformCallback } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { CHUNK, chunkCount, NONCE_PREFIX_BYTES, tampered, TAG_BYTES } from './chunked-aead.js';

/**
 * Decryption of large reads on a worker thread. AES-GCM through node:crypto costs about as much CPU per
 * MiB as the rest of a large GET (file read, the in-process hop, the gateway, the socket), all on one
 * event loop; on its own thread it runs beside it, on the other core (hack/bench/measurements.md). The
 * thread deciphers batches of whole chunks that the stream copies into pooled shared buffers, and
 * sends each batch's plaintext back (transferred, not copied). The chunk layout (nonce = prefix | uint32
 * index, additional data = uint32 index | final flag) is chunked-aead.ts's; the tests check both
 * decryptors against the same segments, tampered ones included.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createDecipheriv } = require('node:crypto');
const CHUNK = ${CHUNK}, TAG = ${TAG_BYTES}, PREFIX = ${NONCE_PREFIX_BYTES};
parentPort.on('message', (m) => {
  const src = new Uint8Array(m.shared, 0, m.length);
  const out = new Uint8Array(m.plainBytes);
  const nonce = Buffer.alloc(12);
  Buffer.from(m.prefix).copy(nonce, 0, 0, PREFIX);
  let at = 0, o = 0;
  for (let i = m.first; i < m.first + m.n; i++) {
    const final = i === m.count - 1;
    const body = final ? m.plain - i * CHUNK : CHUNK;
    nonce.writeUInt32BE(i, PREFIX);
    const aad = Buffer.alloc(5);
    aad.writeUInt32BE(i, 0);
    aad[4] = final ? 1 : 0;
    const d = createDecipheriv('aes-256-gcm', m.key, nonce);
    d.setAAD(aad);
    d.setAuthTag(src.subarray(at + body, at + body + TAG));
    const p = d.update(src.subarray(at, at + body));
    try {
      d.final();
    } catch {
      parentPort.postMessage({ id: m.id, tampered: true });
      return;
    }
    out.set(p, o);
    o += p.length;
    at += body + TAG;
  }
  parentPort.postMessage({ id: m.id, plain: out.buffer }, [out.buffer]);
});
`;

/** Chunks per batch: about 1 MiB of plaintext, one message each way. */
const BATCH_CHUNKS = 16;
const BATCH_BYTES = BATCH_CHUNKS * (CHUNK + TAG_BYTES);
/** Batches in flight per stream: one filling while the thread deciphers the others. */
const RING = 3;
/** Shared batch buffers kept for reuse across reads. */
const pool: Buffer[] = [];

type Answer = { id: number; plain?: ArrayBuffer; tampered?: true };
let worker: Worker | undefined;
let nextId = 1;
const waiting = new Map<number, { resolve: (plain: Buffer) => void; reject: (err: Error) => void }>();

function thread(): Worker {
  if (worker) return worker;
  const w = new Worker(WORKER_SOURCE, { eval: true });
  w.unref();
  w.on('message', (m: Answer) => {
    const p = waiting.get(m.id);
    if (!p) return;
    forget(m.id);
    if (m.plain) p.resolve(Buffer.from(m.plain));
    else p.reject(tampered());
  });
  const fail = (err: Error) => {
    if (worker === w) worker = undefined;
    for (const [id, p] of waiting) {
      forget(id);
      p.reject(err);
    }
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`the decryption thread exited (${code})`)));
  worker = w;
  return w;
}

function forget(id: number): void {
  if (waiting.delete(id) && waiting.size === 0) worker?.unref();
}

/** The plaintext of chunks first..first+n-1 of a segment, deciphered on the thread from `shared` (their stored bytes). */
function decryptBatch(shared: Buffer, length: number, o: { key: Buffer; prefix: Buffer; plain: number; first: number; n: number }): Promise<Buffer> {
  const w = thread();
  const id = nextId++;
  const count = chunkCount(o.plain);
  const lastBody = o.first + o.n === count ? o.plain - (count - 1) * CHUNK : CHUNK;
  return new Promise((resolve, reject) => {
    if (waiting.size === 0) w.ref();
    waiting.set(id, { resolve, reject });
    w.postMessage({
      id,
      shared: shared.buffer,
      length,
      key: o.key,
      prefix: o.prefix,
      plain: o.plain,
      count,
      first: o.first,
      n: o.n,
      plainBytes: (o.n - 1) * CHUNK + lastBody,
    });
  });
}

/**
 * SegmentDecryptor's contract (chunked-aead.ts) with the deciphering on the decryption thread: the
 * stored bytes of chunks `first`.. of a segment of `plain` bytes in (after the nonce prefix when that is
 * given, else with it), plaintext bytes [skip, skip+length) out, in order, each batch only once every
 * tag in it verified; a short or altered stream fails. Meant for large reads (small ones cost less
 * deciphered in place than a round trip to the thread).
 */
export class ThreadedSegmentDecryptor extends Transform {
  private prefixParts: Buffer[] = [];
  private next: number;
  private readonly last: number;
  private readonly count: number;
  private skip: number;
  private left: number;
  /** The batch filling: its buffer, bytes in it, its first chunk, its chunks complete so far and the bytes they span. */
  private batch: Buffer | undefined;
  private filled = 0;
  private batchFirst: number;
  private whole = 0;
  private wholeBytes = 0;
  /** Batches sent, oldest first: their plaintext to come, and their buffer to give back. */
  private readonly inFlight: Array<{ plain: Promise<Buffer>; buffer: Buffer }> = [];
  private readonly spare: Buffer[] = [];

  constructor(
    private readonly key: Buffer,
    private prefix: Buffer | undefined,
    private readonly plain: number,
    first: number,
    skip: number,
    length: number,
  ) {
    super();
    this.count = chunkCount(plain);
    this.next = first;
    this.batchFirst = first;
    this.last = Math.min(this.count - 1, first + Math.floor((skip + length - 1) / CHUNK));
    this.skip = skip;
    this.left = length;
  }

  private storedSizeOf(index: number): number {
    return (index === this.count - 1 ? this.plain - index * CHUNK : CHUNK) + TAG_BYTES;
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
    for (let at = from; at < chunk.length && this.next + this.whole <= this.last; ) {
      if (!this.batch) {
        while (this.inFlight.length >= RING) await this.passOldest();
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
        if (this.whole === BATCH_CHUNKS || this.next + this.whole > this.last) this.send();
      }
    }
  }

  private send(): void {
    if (!this.batch || this.whole === 0) return;
    const buffer = this.batch;
    const plain = decryptBatch(buffer, this.wholeBytes, { key: this.key, prefix: this.prefix!, plain: this.plain, first: this.next, n: this.whole });
    plain.catch(() => undefined);
    this.inFlight.push({ plain, buffer });
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
    if (this.skip >= bytes.length) {
      this.skip -= bytes.length;
      return;
    }
    const piece = bytes.subarray(this.skip, this.skip + this.left);
    this.skip = 0;
    this.left -= piece.length;
    if (piece.length) this.push(piece);
  }

  override _flush(done: TransformCallback): void {
    (async () => {
      // Bytes of an incomplete chunk left over: the stream was cut short (send() ignores them; the check below fails).
      this.send();
      while (this.inFlight.length) await this.passOldest();
      if (this.left > 0) throw tampered();
    })().then(() => done(), done);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // The thread may still read a batch: its buffer goes back to the pool only once it answered.
    const inFlight = this.inFlight.splice(0);
    Promise.allSettled(inFlight.map((b) => b.plain)).then(() => {
      for (const buf of [...this.spare.splice(0), ...inFlight.map((b) => b.buffer), ...(this.batch ? [this.batch] : [])]) if (pool.length < 8) pool.push(buf);
      this.batch = undefined;
      callback(error);
    }, callback);
  }
}
