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
