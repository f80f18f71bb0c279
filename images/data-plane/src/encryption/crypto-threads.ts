import { CHUNK, NONCE_PREFIX_BYTES, TAG_BYTES } from './chunked-aead.js';
import { CryptoPool } from './crypto-pool.js';

/**
 * The code of the encryption threads: AES-256-GCM of batches of whole chunks in chunked-aead.ts's
 * layout (nonce = prefix | uint32 index, additional data = uint32 index | final flag; each chunk's
 * 16-byte tag after it), read in place from a shared buffer, the result sent back transferred.
 *
 * - `open`: `length` stored bytes of chunks first..first+n-1 of a segment of `plain` bytes (`count`
 *   chunks) → `{ plain }` (their plaintext), or `{ tampered: true }` when a tag fails.
 * - `seal`: `length` plaintext bytes, chunks from `first` on (every one full but maybe the last) →
 *   `{ sealed }` (each chunk enciphered, its tag after it); `final`: the batch's last chunk is the
 *   segment's last (an empty final batch is one empty chunk).
 */
export const CRYPTO_THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createCipheriv, createDecipheriv } = require('node:crypto');
const CHUNK = ${CHUNK}, TAG = ${TAG_BYTES}, PREFIX = ${NONCE_PREFIX_BYTES};
function nonceAad(m, i, final) {
  const nonce = Buffer.alloc(12);
  Buffer.from(m.prefix).copy(nonce, 0, 0, PREFIX);
  nonce.writeUInt32BE(i, PREFIX);
  const aad = Buffer.alloc(5);
  aad.writeUInt32BE(i, 0);
  aad[4] = final ? 1 : 0;
  return [nonce, aad];
}
function open(m) {
  const src = new Uint8Array(m.shared, 0, m.length);
  const out = new Uint8Array(m.plainBytes);
  let at = 0, o = 0;
  for (let i = m.first; i < m.first + m.n; i++) {
    const final = i === m.count - 1;
    const body = final ? m.plain - i * CHUNK : CHUNK;
    const [nonce, aad] = nonceAad(m, i, final);
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
    const [nonce, aad] = nonceAad(m, i, m.final && k === n - 1);
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
  const r = m.op === 'seal' ? seal(m) : open(m);
  if (Array.isArray(r)) parentPort.postMessage(r[0], r[1]);
  else parentPort.postMessage(r);
});
`;

/** Threads of the pool: two, so one large transfer's batches are enciphered side by side on both cores. */
const THREADS = 2;

let shared: CryptoPool | undefined;

/** The process's pool of encryption threads (started on first use). */
export function cryptoPool(): CryptoPool {
  return (shared ??= new CryptoPool(CRYPTO_THREAD_SOURCE, THREADS, 'strata-crypto'));
}
