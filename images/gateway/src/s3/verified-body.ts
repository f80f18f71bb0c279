import { Transform, type TransformCallback } from 'node:stream';
import { S3Error } from '../../../object-model/src/index.js';

/** Something checked over an upload's bytes as they stream, and judged once they have all passed. */
export interface BodyCheck {
  /** May throw (an S3Error) as soon as the body is known to fail. */
  update(chunk: Buffer): void;
  /** Throws (an S3Error) when the body fails the check. */
  finish(): void | Promise<void>;
}

/** The body's size within bounds (inclusive): EntityTooLarge as soon as it passes the top, EntityTooSmall at the end. */
export class SizeRangeCheck implements BodyCheck {
  private size = 0;

  constructor(
    private readonly min: number,
    private readonly max: number,
  ) {}

  update(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.max)
      throw new S3Error('EntityTooLarge', 'Your proposed upload exceeds the maximum allowed size.', { MaxSizeAllowed: String(this.max) });
  }

  finish(): void {
    if (this.size < this.min)
      throw new S3Error('EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed size.', { MinSizeAllowed: String(this.min) });
  }
}

/**
 * An upload's bytes passed on while every check sees them. The last piece is held back until every
 * check holds, so a body that fails one never completes the upstream upload: the data plane sees a
 * short body and stores nothing.
 */
export class VerifiedBody extends Transform {
  private pending: Buffer | undefined;

  constructor(private readonly checks: readonly BodyCheck[]) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      for (const check of this.checks) check.update(chunk);
    } catch (err) {
      done(err as Error);
      return;
    }
    if (this.pending) this.push(this.pending);
    this.pending = chunk;
    done();
  }

  override _flush(done: TransformCallback): void {
    void (async () => {
      for (const check of this.checks) await check.finish();
    })().then(
      () => {
        if (this.pending) this.push(this.pending);
        done();
      },
      (err: Error) => done(err),
    );
  }
}
