import { expect } from 'chai';
import { S3Error } from '../../images/object-model/src/index.js';

/** The S3Error a call fails with; the test fails when the call succeeds or fails with anything else. */
export function s3Rejection(p: Promise<unknown>): Promise<S3Error> {
  return p.then(
    (value) => expect.fail(`expected an S3 error, got ${JSON.stringify(value)}`),
    (err: unknown) => {
      expect(err, String(err)).to.be.instanceOf(S3Error);
      return err as S3Error;
    },
  );
}
