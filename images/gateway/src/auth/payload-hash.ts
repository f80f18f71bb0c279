import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { S3Error } from '../../../service-kit/src/index.js';

/**
 * Checks a body against the sha256 the client signed (x-amz-content-sha256) while it streams. The last
 * piece is held back until the hash is known, so a body that does not match never completes the
 * upstream upload: the data plane sees a short body and stores nothing.
 */
export class PayloadHashVerifier extends Transform {
  private readonly hash = createHash('sha256');
  private pending: Buffer | undefined;

  constructor(private readonly expectedHex: string) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.hash.update(chunk);
    if (this.pending) this.push(this.pending);
    this.pending = chunk;
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.hash.digest('hex') !== this.expectedHex) {
      done(new S3Error('BadDigest', 'The provided x-amz-content-sha256 header does not match what was computed (XAmzContentSHA256Mismatch).'));
      return;
    }
    if (this.pending) this.push(this.pending);
    done();
  }
}
