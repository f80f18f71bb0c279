import { createHash } from 'node:crypto';
import { S3Error } from '../../../object-model/src/index.js';
import type { BodyCheck } from '../s3/verified-body.js';

/** The body against the sha256 the client signed (x-amz-content-sha256). */
export class PayloadHashCheck implements BodyCheck {
  private readonly hash = createHash('sha256');

  constructor(private readonly expectedHex: string) {}

  update(chunk: Buffer): void {
    this.hash.update(chunk);
  }

  finish(): void {
    if (this.hash.digest('hex') !== this.expectedHex) {
      throw new S3Error('BadDigest', 'The provided x-amz-content-sha256 header does not match what was computed (XAmzContentSHA256Mismatch).');
    }
  }
}
