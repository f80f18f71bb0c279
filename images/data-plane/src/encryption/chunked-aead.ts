import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { S3Error } from '../../../object-model/src/index.js';

/**
 * Chunked authenticated encryption of object bytes (the layout on the backend). One "segment" is the
 * bytes of one upload: a PutObject's body, or one multipart part (each part its own segment, so parts
 * are encrypted independently and compose by concatenation). A segment is
 *
 *   nonce prefix (8 random bytes) | chunk 0 | chunk 1 | ... | chunk n-1
 *
 * and chunk i is AES-256-GCM of up to CHUNK plaintext bytes (every chunk but the last is full), with its
 * 16-byte tag after it, nonce = prefix | uint32 i, and additional data uint32 i | final flag. A chunk
 * therefore cannot be moved, dropped from the end (the last one must carry the final flag) or altered
 * without its tag failing, and a range read decrypts only the chunks it covers. An empty segment is one
 * empty final chunk (its tag proves the emptiness).
 */
export const CHUNK = 64 * 1024;
const TAG = 16;
const PREFIX = 8;

/** Chunks of a segment of `plain` bytes. */
export function chunkCount(plain: number): number {
  return Math.max(1, Math.ceil(plain / CHUNK));
}

/** Stored bytes of a segment of `plain` bytes. */
export function segmentSize(plain: number): number {
  return PREFIX + plain + TAG * chunkCount(plain);
}

function nonce(prefix: Buffer, index: number): Buffer {
  const n = Buffer.alloc(12);
  prefix.copy(n, 0, 0, PREFIX);
  n.writeUInt32BE(index, PREFIX);
  return n;
}

function aad(index: number, final: boolean): Buffer {
  const a = Buffer.alloc(5);
  a.writeUInt32BE(index, 0);
  a[4] = final ? 1 : 0;
  return a;
}

/** Encrypts a stream of plaintext into one segment; `beforeFinal` runs before the last chunk is sealed (a check that may fail the stream). */
export class SegmentEncryptor extends Transform {
  private readonly prefix = randomBytes(PREFIX);
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private index = 0;

  constructor(
    private readonly key: Buffer,
    private readonly beforeFinal: () => void | Promise<void> = () => undefined,
  ) {
    super();
    this.push(this.prefix);
  }

  private seal(plain: Buffer, final: boolean): Buffer {
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce(this.prefix, this.index));
    cipher.setAAD(aad(this.index, final));
    const body = cipher.update(plain);
    cipher.final();
    this.index++;
    return Buffer.concat([body, cipher.getAuthTag()]);
  }

  private takePending(n: number): Buffer {
    const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    const head = all.subarray(0, n);
    const rest = all.subarray(n);
    this.pending = rest.length ? [rest] : [];
    this.pendingBytes = rest.length;
    return head;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    // A full chunk goes once more bytes follow it: the last chunk must be known to be the last.
    while (this.pendingBytes > CHUNK) this.push(this.seal(this.takePending(CHUNK), false));
    done();
  }

  override _flush(done: TransformCallback): void {
    Promise.resolve()
      .then(this.beforeFinal)
      .then(
        () => done(null, this.seal(this.takePending(this.pendingBytes), true)),
        (err: unknown) => done(err as Error),
      );
  }
}

function tampered(): S3Error {
  return new S3Error('InternalError', "The object's stored bytes failed authentication; nothing of them is served.");
}

/**
 * Decrypts the stored bytes of chunks `first`.. of a segment of `plain` plaintext bytes (the stream
 * starts at chunk `first`, after the nonce prefix when that is given, else with the prefix) and passes on plaintext bytes [skip, skip+length)
 * of what those chunks hold. A chunk is passed on only once its tag verified; a short or altered stream fails.
 */
export class SegmentDecryptor extends Transform {
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  private index: number;
  private skip: number;
  private left: number;
  private readonly count: number;

  constructor(
    private readonly key: Buffer,
    private prefix: Buffer | undefined,
    plain: number,
    first: number,
    skip: number,
    length: number,
  ) {
    super();
    this.count = chunkCount(plain);
    this.plain = plain;
    this.index = first;
    this.skip = skip;
    this.left = length;
  }

  private readonly plain: number;

  private chunkBytes(i: number): number {
    return (i === this.count - 1 ? this.plain - i * CHUNK : CHUNK) + TAG;
  }

  private open(sealed: Buffer): Buffer {
    const final = this.index === this.count - 1;
    const decipher = createDecipheriv('aes-256-gcm', this.key, nonce(this.prefix!, this.index));
    decipher.setAAD(aad(this.index, final));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG));
    const body = decipher.update(sealed.subarray(0, sealed.length - TAG));
    try {
      decipher.final();
    } catch {
      throw tampered();
    }
    this.index++;
    return body;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.buffered.push(chunk);
    this.bufferedBytes += chunk.length;
    if (this.prefix === undefined) {
      if (this.bufferedBytes < PREFIX) {
        done();
        return;
      }
      const all = Buffer.concat(this.buffered);
      this.prefix = all.subarray(0, PREFIX);
      this.buffered = all.length > PREFIX ? [all.subarray(PREFIX)] : [];
      this.bufferedBytes = all.length - PREFIX;
    }
    try {
      while (this.left > 0 && this.index < this.count && this.bufferedBytes >= this.chunkBytes(this.index)) {
        const need = this.chunkBytes(this.index);
        const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered);
        const plain = this.open(all.subarray(0, need));
        const rest = all.subarray(need);
        this.buffered = rest.length ? [rest] : [];
        this.bufferedBytes = rest.length;
        const out = plain.subarray(this.skip, this.skip + this.left);
        this.skip = Math.max(0, this.skip - plain.length);
        this.left -= out.length;
        if (out.length) this.push(out);
      }
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    done(this.left > 0 ? tampered() : null);
  }
}

/** Where plaintext bytes [start, end] of a segment of `plain` bytes are: the chunks to read, as stored offsets in the segment. */
export function segmentRange(plain: number, start: number, end: number): { first: number; from: number; to: number; skip: number } {
  const first = Math.floor(start / CHUNK);
  const last = Math.min(Math.floor(end / CHUNK), chunkCount(plain) - 1);
  const from = PREFIX + first * (CHUNK + TAG);
  const lastBytes = (last === chunkCount(plain) - 1 ? plain - last * CHUNK : CHUNK) + TAG;
  const to = PREFIX + last * (CHUNK + TAG) + lastBytes - 1;
  return { first, from, to, skip: start - first * CHUNK };
}

export const NONCE_PREFIX_BYTES = PREFIX;
