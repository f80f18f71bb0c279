import { Transform, type TransformCallback } from 'node:stream';
import { Worker } from 'node:worker_threads';

/**
 * MD5 of large bodies on a worker thread. Hashing is the largest single cost of a large PUT on the
 * event loop that also runs the rest of the service (and, in `npm start`, every
 * other service and PGlite); on its own thread it runs on another core, beside the socket and file work.
 * One thread (plain JavaScript, no modules) serves every upload, started on first use. Bytes in a
 * SharedArrayBuffer (FileSink's buffers) are hashed in place, without a copy or an allocation; other
 * bytes are copied to the thread. `update` resolves once the thread has hashed those bytes, so the
 * caller may then reuse its buffer, and a caller that awaits it never has more than it gave in flight.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const hashes = new Map();
parentPort.on('message', (m) => {
  if (m.op === 'update') {
    let h = hashes.get(m.id);
    if (!h) hashes.set(m.id, (h = createHash('md5')));
    h.update(m.shared ? new Uint8Array(m.shared, m.offset, m.length) : m.bytes);
    parentPort.postMessage({ op: 'ack', id: m.id });
  } else if (m.op === 'digest') {
    const h = hashes.get(m.id) ?? createHash('md5');
    hashes.delete(m.id);
    parentPort.postMessage({ op: 'digest', id: m.id, hex: h.digest('hex') });
  } else if (m.op === 'drop') {
    hashes.delete(m.id);
  }
});
`;

type FromWorker = { op: 'ack'; id: number } | { op: 'digest'; id: number; hex: string };

interface Pending {
  /** One per update sent, in order (the thread answers each port's messages in order). */
  acks: Array<{ resolve: () => void; reject: (err: Error) => void }>;
  digest?: { resolve: (hex: string) => void; reject: (err: Error) => void };
  failed?: Error;
}

let worker: Worker | undefined;
let nextId = 1;
const pending = new Map<number, Pending>();

function thread(): Worker {
  if (worker) return worker;
  const w = new Worker(WORKER_SOURCE, { eval: true });
  // The thread keeps the process alive only while a hash is pending (see track/untrack); idle, it does not.
  w.unref();
  w.on('message', (m: FromWorker) => {
    const p = pending.get(m.id);
    if (!p) return;
    if (m.op === 'ack') {
      p.acks.shift()?.resolve();
    } else {
      untrack(m.id);
      p.digest?.resolve(m.hex);
    }
  });
  const fail = (err: Error) => {
    if (worker === w) worker = undefined;
    for (const [id, p] of pending) {
      untrack(id);
      p.failed = err;
      for (const a of p.acks.splice(0)) a.reject(err);
      p.digest?.reject(err);
    }
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`the MD5 thread exited (${code})`)));
  worker = w;
  return w;
}

function track(id: number, state: Pending): void {
  if (pending.size === 0) worker?.ref();
  pending.set(id, state);
}

function untrack(id: number): boolean {
  const had = pending.delete(id);
  if (had && pending.size === 0) worker?.unref();
  return had;
}

/** An MD5 computed on the shared worker thread from the bytes given to `update`, in order. */
export class ThreadMd5 {
  private readonly id = nextId++;
  private readonly state: Pending = { acks: [] };
  private readonly worker = thread();

  constructor() {
    track(this.id, this.state);
  }

  /**
   * Hash `bytes` next; resolves once they are hashed. Bytes in a SharedArrayBuffer are read in place
   * (keep them unchanged until then); others are copied at once.
   */
  update(bytes: Uint8Array): Promise<void> {
    if (this.state.failed) return Promise.reject(this.state.failed);
    const done = new Promise<void>((resolve, reject) => this.state.acks.push({ resolve, reject }));
    if (bytes.buffer instanceof SharedArrayBuffer) {
      this.worker.postMessage({ op: 'update', id: this.id, shared: bytes.buffer, offset: bytes.byteOffset, length: bytes.length });
    } else {
      this.worker.postMessage({ op: 'update', id: this.id, bytes });
    }
    return done;
  }

  digestHex(): Promise<string> {
    if (this.state.failed) return Promise.reject(this.state.failed);
    return new Promise((resolve, reject) => {
      this.state.digest = { resolve, reject };
      this.worker.postMessage({ op: 'digest', id: this.id });
    });
  }

  /** Forget the hash (a failed upload). */
  drop(): void {
    if (!untrack(this.id)) return;
    // Updates still in flight are answered (acks) by nobody now: settle them.
    for (const a of this.state.acks.splice(0)) a.resolve();
    this.worker.postMessage({ op: 'drop', id: this.id });
  }
}

/** Size of each MD5 tap buffer: bytes are gathered into shared buffers this large before each goes to the thread. */
const TAP_BUFFER = 1024 * 1024;
/** Buffers per tap: one filling while the thread hashes the others. */
const TAP_RING = 3;
/** Tap buffers kept for reuse across uploads (a shared buffer is freed only once both threads let go of it). */
const tapPool: Buffer[] = [];

/**
 * A pass-through stream that hashes what flows through it on the MD5 thread (`md5`). Chunks are copied
 * into a ring of pooled 1 MiB shared buffers and each full one is hashed in place, so the thread gets
 * one message per MiB instead of one copy per socket chunk. Chunks are passed on at once; a chunk
 * waits only while every buffer is still being hashed (backpressure: the thread sets the pace). When
 * the stream has ended, every byte has been given to `md5` (its digest may be asked for).
 */
export class Md5Tap extends Transform {
  private readonly buffers: Buffer[] = [];
  private readonly inFlight: Array<Promise<void> | undefined> = [];
  private current = 0;
  private filled = 0;

  constructor(private readonly md5: ThreadMd5) {
    super({ highWaterMark: TAP_BUFFER });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.gather(chunk).then(() => done(null, chunk), done);
  }

  private async gather(chunk: Buffer): Promise<void> {
    for (let offset = 0; offset < chunk.length; ) {
      if (this.filled === 0) await this.settle(this.current);
      const buf = (this.buffers[this.current] ??= tapPool.pop() ?? Buffer.from(new SharedArrayBuffer(TAP_BUFFER)));
      const n = Math.min(chunk.length - offset, TAP_BUFFER - this.filled);
      // fill() with a Buffer is one native memcpy (see FileSink.append).
      buf.fill(n === chunk.length ? chunk : chunk.subarray(offset, offset + n), this.filled, this.filled + n);
      this.filled += n;
      offset += n;
      if (this.filled === TAP_BUFFER) this.hashCurrent();
    }
  }

  private hashCurrent(): void {
    if (this.filled === 0) return;
    const pending = this.md5.update(this.buffers[this.current]!.subarray(0, this.filled));
    pending.catch(() => undefined);
    this.inFlight[this.current] = pending;
    this.current = (this.current + 1) % TAP_RING;
    this.filled = 0;
  }

  private async settle(i: number): Promise<void> {
    const pending = this.inFlight[i];
    this.inFlight[i] = undefined;
    await pending;
  }

  private async settleAll(): Promise<void> {
    let failure: unknown;
    for (let i = 0; i < TAP_RING; i++) await this.settle(i).catch((err: unknown) => (failure ??= err));
    if (failure !== undefined) throw failure;
  }

  override _flush(done: TransformCallback): void {
    this.hashCurrent();
    this.settleAll().then(() => done(), done);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // The thread may still read a buffer being hashed: back to the pool only once it is done.
    const release = () => {
      for (const buf of this.buffers.splice(0)) if (tapPool.length < 8) tapPool.push(buf);
      callback(error);
    };
    this.settleAll().then(release, release);
  }
}
