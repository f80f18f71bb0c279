import { CHUNK, NONCE_PREFIX_BYTES, TAG_BYTES, tampered, type PlainWindow } from './chunked-aead.js';
import { CryptoPool, type PoolAnswer, type PoolStream } from './crypto-pool.js';

/** Chunks per job (a batch): about 1 MiB of plaintext, one message each way. */
export const BATCH_CHUNKS = 16;
/**
 * Batches in flight per stream: both threads of the pool busy and more queued, so that on a busy host
 * (each thread running in slices between others') the threads find work while the event loop waits.
 */
export const BATCHES_IN_FLIGHT = 8;

/**
 * The code of the encryption threads: AES-256-GCM of batches of whole chunks in chunked-aead.ts's
 * layout (nonce = prefix | uint32 index, additional data = uint32 index | final flag; each chunk's
 * 16-byte tag after it), read in place from a shared buffer, the result sent back transferred.
 *
 * - `open`: `length` stored bytes of chunks first..first+n-1 of a segment of `plain` bytes (`count`
 *   chunks) → `{ plain }` (their plaintext), or `{ tampered: true }` when a tag fails.
 * - `read`: as `open`, the stored bytes read by the thread itself from the open file `fd` at `at` into a
 *   buffer of its own; a short read is `{ tampered: true }` (the file was cut), a failed one `{ failed }`
 *   (its message). The file is the caller's: it stays open until every job that reads it was answered.
 * - `seal`: `length` plaintext bytes, chunks from `first` on (every one full but maybe the last) →
 *   `{ sealed }` (each chunk enciphered, its tag after it); `final`: the batch's last chunk is the
 *   segment's last (an empty final batch is one empty chunk).
 */
export const CRYPTO_THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createCipheriv, createDecipheriv } = require('node:crypto');
const { readSync } = require('node:fs');
const CHUNK = ${CHUNK}, TAG = ${TAG_BYTES}, PREFIX = ${NONCE_PREFIX_BYTES}, BATCH = ${BATCH_CHUNKS * (CHUNK + TAG_BYTES)};
function nonceAad(prefix, i, final) {
  const nonce = Buffer.alloc(12);
  Buffer.from(prefix).copy(nonce, 0, 0, PREFIX);
  nonce.writeUInt32BE(i, PREFIX);
  const aad = Buffer.alloc(5);
  aad.writeUInt32BE(i, 0);
  aad[4] = final ? 1 : 0;
  return [nonce, aad];
}
function open(m) {
  return decipher(m, new Uint8Array(m.shared, 0, m.length), m.prefix);
}
let readBuffer;
function readAt(fd, buf, length, position) {
  let got = 0;
  for (let n = -1; got < length && n !== 0; got += n) n = readSync(fd, buf, got, length - got, position + got);
  return got;
}
function read(m) {
  if (!readBuffer || readBuffer.length < m.length) readBuffer = Buffer.allocUnsafe(Math.max(m.length, BATCH));
  try {
    if (readAt(m.fd, readBuffer, m.length, m.at) < m.length) return { id: m.id, tampered: true };
  } catch (err) {
    return { id: m.id, failed: String(err && err.message) };
  }
  return decipher(m, readBuffer.subarray(0, m.length), m.prefix);
}
function decipher(m, src, prefix) {
  const out = new Uint8Array(m.plainBytes);
  let at = 0, o = 0;
  for (let i = m.first; i < m.first + m.n; i++) {
    const final = i === m.count - 1;
    const body = final ? m.plain - i * CHUNK : CHUNK;
    const [nonce, aad] = nonceAad(prefix, i, final);
    const d = createDecipheriv('aes-256-gcm', m.key, nonce);
    d.setAAD(aad);
    d.setAuthTag(src.subarray(at + body, at + body + TAG));
    const p = d.update(src.subarray(at, at + body));
    try {
      d.final();
    } catch {
      return { id: m.id, tampered: true };
    }
    out.set(p, o);
    o += p.length;
    at += body + TAG;
  }
  return [{ id: m.id, plain: out.buffer }, [out.buffer]];
}
function seal(m) {
  const src = new Uint8Array(m.shared, 0, m.length);
  const n = Math.max(1, Math.ceil(m.length / CHUNK));
  const out = new Uint8Array(m.length + n * TAG);
  let at = 0, o = 0;
  for (let k = 0; k < n; k++) {
    const i = m.first + k;
    const body = Math.min(CHUNK, m.length - at);
    const [nonce, aad] = nonceAad(m.prefix, i, m.final && k === n - 1);
    const c = createCipheriv('aes-256-gcm', m.key, nonce);
    c.setAAD(aad);
    const enciphered = c.update(src.subarray(at, at + body));
    c.final();
    out.set(enciphered, o);
    out.set(c.getAuthTag(), o + body);
    o += body + TAG;
    at += body;
  }
  return [{ id: m.id, sealed: out.buffer }, [out.buffer]];
}
parentPort.on('message', (m) => {
  const r = m.op === 'seal' ? seal(m) : m.op === 'read' ? read(m) : open(m);
  if (Array.isArray(r)) parentPort.postMessage(r[0], r[1]);
  else parentPort.postMessage(r);
});
`;

/**
 * A decryption on the threads: plaintext `window` of a segment under `key`; `tenant`: whose read it is (the
 * object's owner), for the pool's fairness.
 */
export interface ThreadedRead {
  key: Buffer;
  window: PlainWindow;
  tenant?: string;
  threads?: CryptoPool;
}

/** A threaded read's stream on the pool, and its key as the threads are sent it: a copy of its own (a pooled Buffer's whole slab would be cloned). */
export function threadLane(read: ThreadedRead): { lane: PoolStream; keyBytes: Uint8Array } {
  return { lane: (read.threads ?? cryptoPool()).stream(read.tenant ?? ''), keyBytes: new Uint8Array(read.key) };
}

/** The plaintext an `open` or `read` job answered (no copy); its failure as an error. */
export function plaintextOf(answer: PoolAnswer): Buffer {
  if (typeof answer.failed === 'string') throw new Error(`reading an encrypted blob failed: ${answer.failed}`);
  if (!answer.plain) throw tampered();
  return Buffer.from(answer.plain as ArrayBuffer);
}

/** Threads of the pool: two, so one large transfer's batches are enciphered side by side on both cores. */
const THREADS = 2;

let shared: CryptoPool | undefined;

/** The process's pool of encryption threads (started on first use). */
export function cryptoPool(): CryptoPool {
  return (shared ??= new CryptoPool(CRYPTO_THREAD_SOURCE, THREADS, 'strata-crypto'));
}
