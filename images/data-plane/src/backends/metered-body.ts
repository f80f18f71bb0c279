// What every storage backend does to an incoming body: count and MD5-hash it as it streams past,
// stop it at its size limit, and check size and digest before the blob is published.
import { createHash } from 'node:crypto';
import { PassThrough, type Readable, Transform, type TransformCallback } from 'node:stream';
import { S3Error } from '../../../object-model/src/index.js';
import type { PutOptions } from './storage-backend.js';

/** Counts and hashes bytes as they stream past, and stops a body that grows beyond its limit. */
export class HashingCounter extends Transform {
  private readonly hash = createHash('md5');
  size = 0;

  /** `hashing: false` counts and limits only (the caller hashes the bytes elsewhere, e.g. ThreadMd5). */
  constructor(
    private readonly limit: number,
    private readonly tooLarge: () => Error,
    private readonly hashing = true,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.meter(chunk);
    } catch (err) {
      done(err as Error);
      return;
    }
    done(null, chunk);
  }

  /** Count and hash one chunk without passing it on; throws the too-large error past the limit. */
  meter(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.limit) throw this.tooLarge();
    if (this.hashing) this.hash.update(chunk);
  }

  digestHex(): string {
    return this.hash.digest('hex');
  }
}

export interface MeteredBody {
  /** The body, detached from the request: a failure ends this side without destroying the request, so the caller can still answer with an S3 error. */
  source: PassThrough;
  /** Pipe `source` through it: it counts, hashes and enforces the size limit. */
  counter: HashingCounter;
  /**
   * Throws IncompleteBody or BadDigest when the whole body does not match what the request declared
   * (`md5` null: the bytes were not hashed, so an expected MD5 cannot match).
   */
  verify(size: number, md5: string | null): void;
}

/** The size past which a body is refused, and the error it gets. */
function sizeLimit(opts: PutOptions): { limit: number; tooLarge: () => Error } {
  return {
    limit: Math.min(opts.maxSize ?? Number.MAX_SAFE_INTEGER, opts.expectedSize ?? Number.MAX_SAFE_INTEGER),
    tooLarge: () =>
      opts.expectedSize !== undefined && opts.expectedSize < (opts.maxSize ?? Infinity)
        ? new S3Error('InvalidRequest', 'the body is longer than its Content-Length')
        : new S3Error('EntityTooLarge'),
  };
}

/** Throws IncompleteBody or BadDigest when the whole body does not match what the request declared. */
function verifyBody(opts: PutOptions, size: number, md5: string | null): void {
  if (opts.expectedSize !== undefined && size !== opts.expectedSize) throw new S3Error('IncompleteBody');
  if (opts.expectedMd5 !== undefined && md5 !== opts.expectedMd5) throw new S3Error('BadDigest');
}

/** The metering a PUT of `body` with `opts` needs (the same rules on every backend). */
export function meteredBody(body: Readable, opts: PutOptions, hashing = true): MeteredBody {
  const { limit, tooLarge } = sizeLimit(opts);
  const counter = new HashingCounter(limit, tooLarge, hashing);
  const source = new PassThrough();
  // Listened to from the start: the body may fail (a client reset) while the backend still prepares
  // its destination (a directory, a connection) before its pipeline listens; an 'error' without a
  // listener would end the process. The pipeline, once it runs, finds the stream failed and rejects.
  source.on('error', () => undefined);
  body.on('error', (err) => source.destroy(err));
  body.pipe(source);
  return {
    source,
    counter,
    verify: (size, md5) => verifyBody(opts, size, md5),
  };
}

/**
 * A small body read whole into memory under the same rules (size limit, declared size, Content-MD5),
 * hashed as it arrives. Read from the body's own events: the stream objects of meteredBody (a
 * pass-through, a counter, an async iterator) had cost more than a few KiB of bytes. A failure leaves
 * the body alone (the caller still answers with an S3 error); the body keeps an error listener, so that
 * a reset arriving later cannot end the process.
 */
export function readSmallBody(body: Readable, opts: PutOptions): Promise<{ data: Buffer; size: number; md5: string }> {
  const { limit, tooLarge } = sizeLimit(opts);
  return new Promise((resolve, reject) => {
    const hash = createHash('md5');
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      body.off('data', onData);
      body.off('end', onEnd);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop();
        reject(tooLarge());
        return;
      }
      hash.update(chunk);
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      const md5 = hash.digest('hex');
      try {
        verifyBody(opts, size, md5);
      } catch (err) {
        reject(err);
        return;
      }
      resolve({ data: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), size, md5 });
    };
    body.on('error', (err) => {
      stop();
      reject(err);
    });
    body.on('data', onData);
    body.on('end', onEnd);
  });
}
