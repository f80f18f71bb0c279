// What every storage backend does to an incoming body: count and MD5-hash it as it streams past,
// stop it at its size limit, and check size and digest before the blob is published.
import { createHash } from 'node:crypto';
import { PassThrough, type Readable, Transform, type TransformCallback, type Writable } from 'node:stream';
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

/** The metering a PUT of `body` with `opts` needs (the same rules on every backend). */
export function meteredBody(body: Readable, opts: PutOptions, hashing = true): MeteredBody {
  const { counter, verify } = bodyMeter(opts, hashing);
  const source = new PassThrough();
  // Listened to from the start: the body may fail (a client reset) while the backend still prepares
  // its destination (a directory, a connection) before its pipeline listens; an 'error' without a
  // listener would end the process. The pipeline, once it runs, finds the stream failed and rejects.
  source.on('error', () => undefined);
  body.on('error', (err) => source.destroy(err));
  body.pipe(source);
  return { source, counter, verify };
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

/** The counter (size limit, MD5 unless `hashing` is false) and the final check of a PUT with `opts`. */
export function bodyMeter(opts: PutOptions, hashing: boolean): Omit<MeteredBody, 'source'> {
  const { limit, tooLarge } = sizeLimit(opts);
  return { counter: new HashingCounter(limit, tooLarge, hashing), verify: (size, md5) => verifyBody(opts, size, md5) };
}

/**
 * A body to be piped straight into a sink that meters it itself (FileSink's `meter`): no stream between
 * them, so each of a large body's chunks costs two stream hops less than through meteredBody's source
 * and counter. As there, a failure ends the sink and never the body (the request: its caller still
 * answers with an S3 error), and the body is watched from the start, before any sink exists.
 * The body must not flow before the sink is piped (no 'data' listener on it): what it emitted meanwhile
 * would be lost. To count or hash bytes on the way, pass it through a stream (object-model's `observed`).
 */
export function detachedBody(body: Readable): { pipeTo(sink: Writable): Promise<void> } {
  let failure: Error | undefined;
  let target: Writable | undefined;
  const fail = (err: Error) => {
    failure ??= err;
    target?.destroy(err);
  };
  body.on('error', fail);
  // A body that closes without its end (a reset without an error) must not leave the sink waiting.
  body.once('close', () => {
    if (!body.readableEnded) fail(new S3Error('IncompleteBody'));
  });
  return {
    pipeTo(sink) {
      target = sink;
      // (pipe() rethrows a sink's error when nobody else listens; the 'close' below reports it.)
      sink.on('error', () => undefined);
      const closed = new Promise<void>((resolve, reject) =>
        sink.once('close', () => {
          body.unpipe(sink);
          if (sink.errored) reject(sink.errored);
          else if (!sink.writableFinished) reject(failure ?? new S3Error('IncompleteBody'));
          else resolve();
        }),
      );
      if (failure) sink.destroy(failure);
      else body.pipe(sink);
      return closed;
    },
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
