import { Transform, type TransformCallback } from 'node:stream';

/** Something checked over an upload's bytes as they stream, and judged once they have all passed. */
export interface BodyCheck {
  update(chunk: Buffer): void;
  /** Throws (an S3Error) when the body fails the check. */
  finish(): void | Promise<void>;
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
    for (const check of this.checks) check.update(chunk);
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
