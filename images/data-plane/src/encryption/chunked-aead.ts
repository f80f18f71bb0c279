import { createCipheriv, createDecipheriv, randomBytes, type CipherGCM, type DecipherGCM } from 'node:crypto';
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

/**
 * Encrypts a stream of plaintext into one segment; `beforeFinal` runs before the last chunk is sealed (a
 * check that may fail the stream). With the plaintext's size known (`plainSize`, checked upstream: a
 * body of another size fails before its last chunk is sealed), each chunk's final flag is known from the
 * start, so bytes are enciphered as they arrive, without copies; otherwise a full chunk waits until more
 * bytes show it is not the last.
 */
export class SegmentEncryptor extends Transform {
  private readonly prefix = randomBytes(PREFIX);
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private index = 0;
  /** Known size: the chunk being enciphered and its plaintext bytes so far. */
  private cipher: CipherGCM | undefined;
  private inChunk = 0;
  private seen = 0;
  private readonly count: number | undefined;
  private readonly plainSize: number;

  constructor(
    private readonly key: Buffer,
    private readonly beforeFinal: () => void | Promise<void> = () => undefined,
    plainSize?: number,
  ) {
    super();
    this.count = plainSize === undefined ? undefined : chunkCount(plainSize);
    this.plainSize = plainSize ?? 0;
    this.push(this.prefix);
  }

  private startCipher(final: boolean): CipherGCM {
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce(this.prefix, this.index));
    cipher.setAAD(aad(this.index, final));
    return cipher;
  }

  private seal(plain: Buffer, final: boolean): Buffer {
    const cipher = this.startCipher(final);
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
    if (this.count !== undefined) {
      done(this.encipher(chunk, this.count));
      return;
    }
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    // A full chunk goes once more bytes follow it: the last chunk must be known to be the last.
    while (this.pendingBytes > CHUNK) this.push(this.seal(this.takePending(CHUNK), false));
    done();
  }

  /** Known size: `chunk` enciphered into the chunks it falls in; every chunk but the last is closed (its tag) once full. */
  private encipher(chunk: Buffer, count: number): Error | null {
    this.seen += chunk.length;
    if (this.seen > this.plainSize) return new S3Error('InvalidRequest', 'the body is longer than its Content-Length');
    for (let at = 0; at < chunk.length; ) {
      this.cipher ??= this.startCipher(this.index === count - 1);
      const take = Math.min(CHUNK - this.inChunk, chunk.length - at);
      this.push(this.cipher.update(take === chunk.length ? chunk : chunk.subarray(at, at + take)));
      at += take;
      this.inChunk += take;
      if (this.inChunk === CHUNK && this.index < count - 1) {
        this.cipher.final();
        this.push(this.cipher.getAuthTag());
        this.cipher = undefined;
        this.inChunk = 0;
        this.index++;
      }
    }
    return null;
  }

  override _flush(done: TransformCallback): void {
    Promise.resolve()
      .then(this.beforeFinal)
      .then(() => {
        if (this.count === undefined) {
          done(null, this.seal(this.takePending(this.pendingBytes), true));
          return;
        }
        // (A shorter body fails its size check in beforeFinal; this guards the layout regardless.)
        if (this.index !== this.count - 1) throw new S3Error('IncompleteBody');
        const cipher = (this.cipher ??= this.startCipher(true));
        this.cipher = undefined;
        cipher.final();
        done(null, cipher.getAuthTag());
      })
      .catch((err: unknown) => done(err as Error));
  }
}

/** A segment whose stored bytes fail authentication (altered, cut short). */
export function tampered(): S3Error {
  return new S3Error('InternalError', "The object's stored bytes failed authentication; nothing of them is served.");
}

/**
 * Decrypts the stored bytes of chunks `first`.. of a segment of `plain` plaintext bytes (the stream
 * starts at chunk `first`, after the nonce prefix when that is given, else with the prefix) and passes on
 * plaintext bytes [skip, skip+length) of what those chunks hold. Bytes are deciphered as they arrive (no
 * copies); a chunk's plaintext is passed on only once its tag verified; a short or altered stream fails.
 */
export class SegmentDecryptor extends Transform {
  private prefixParts: Buffer[] = [];
  private index: number;
  private skip: number;
  private left: number;
  private readonly count: number;
  private decipher: DecipherGCM | undefined;
  private bodyLeft = 0;
  private tagParts: Buffer[] = [];
  private tagLeft = 0;
  private out: Buffer[] = [];
  /** Verified plaintext of this input chunk's chunks, passed on as one buffer when the input chunk is done. */
  private verified: Buffer[] = [];

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
    this.index = first;
    this.skip = skip;
    this.left = length;
  }

  private startChunk(): void {
    const final = this.index === this.count - 1;
    this.decipher = createDecipheriv('aes-256-gcm', this.key, nonce(this.prefix!, this.index));
    this.decipher.setAAD(aad(this.index, final));
    this.bodyLeft = final ? this.plain - this.index * CHUNK : CHUNK;
    this.tagLeft = TAG;
    this.tagParts = [];
    this.out = [];
  }

  private endChunk(): void {
    const decipher = this.decipher!;
    decipher.setAuthTag(this.tagParts.length === 1 ? this.tagParts[0]! : Buffer.concat(this.tagParts));
    try {
      const last = decipher.final();
      if (last.length) this.out.push(last);
    } catch {
      throw tampered();
    }
    this.decipher = undefined;
    this.index++;
    for (let piece of this.out) {
      if (this.skip >= piece.length) {
        this.skip -= piece.length;
        continue;
      }
      piece = piece.subarray(this.skip, this.skip + this.left);
      this.skip = 0;
      this.left -= piece.length;
      if (piece.length) this.verified.push(piece);
      if (this.left === 0) break;
    }
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    let at = 0;
    if (this.prefix === undefined) {
      const need = PREFIX - this.prefixParts.reduce((n, b) => n + b.length, 0);
      this.prefixParts.push(chunk.subarray(0, need));
      at = Math.min(need, chunk.length);
      if (at < need) {
        done();
        return;
      }
      this.prefix = Buffer.concat(this.prefixParts);
    }
    try {
      while (at < chunk.length && this.left > 0 && this.index < this.count) {
        if (!this.decipher) this.startChunk();
        const take = Math.min(this.bodyLeft > 0 ? this.bodyLeft : this.tagLeft, chunk.length - at);
        const piece = chunk.subarray(at, at + take);
        at += take;
        if (this.bodyLeft > 0) {
          this.bodyLeft -= take;
          const plain = this.decipher!.update(piece);
          if (plain.length) this.out.push(plain);
          continue;
        }
        this.tagParts.push(piece);
        this.tagLeft -= take;
        if (this.tagLeft === 0) this.endChunk();
      }
    } catch (err) {
      done(err as Error);
      return;
    }
    // One buffer per input chunk (a file read of 1 MiB: 16 chunks): one copy here costs less than a
    // stream hop per chunk through the data plane's answer, the gateway and its socket.
    const verified = this.verified;
    this.verified = [];
    done(null, verified.length === 0 ? undefined : verified.length === 1 ? verified[0] : Buffer.concat(verified));
  }

  override _flush(done: TransformCallback): void {
    done(this.left > 0 ? tampered() : null);
  }
}

/**
 * Plaintext bytes [skip, skip+length) of the chunks from `first` on of a segment of `plain` bytes: the
 * last chunk they need, and the deciphered plaintext of those chunks, given in order, cut to them.
 */
export class PlainWindow {
  /** Chunks of the segment. */
  readonly count: number;
  readonly last: number;
  private skip: number;
  private left: number;

  constructor(
    readonly plain: number,
    readonly first: number,
    skip: number,
    length: number,
  ) {
    this.count = chunkCount(plain);
    this.last = Math.min(this.count - 1, first + Math.floor((skip + length - 1) / CHUNK));
    this.skip = skip;
    this.left = length;
  }

  /** Bytes still to come: more than 0 once every chunk was given means the stored bytes ended short. */
  get missing(): number {
    return this.left;
  }

  /** The part of the next deciphered plaintext `bytes` that lies in the window (maybe empty). */
  cut(bytes: Buffer): Buffer {
    if (this.skip >= bytes.length) {
      this.skip -= bytes.length;
      return bytes.subarray(0, 0);
    }
    const piece = bytes.subarray(this.skip, this.skip + this.left);
    this.skip = 0;
    this.left -= piece.length;
    return piece;
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
export const TAG_BYTES = TAG;
