import {
  checkObjectSize,
  checkPartNumber,
  checkPartOrder,
  checkWriteConditions,
  readCopySourceRange,
  readInstantMd5,
  readPageSize,
  S3Error,
} from '../../images/object-model/src/index.js';

/** An S3 error as a client sees it: status, code, message and the extra fields of its body. */
export interface ErrorAnswer {
  status: number;
  code: string;
  message: string;
  extra: Record<string, string>;
}

/** The error `fn` throws, as its answer; fails the test when it throws none or no S3Error. */
export function answerOf(fn: () => unknown): ErrorAnswer {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof S3Error)) throw err;
    return { status: err.status, code: err.code, message: err.message, extra: err.extra };
  }
  throw new Error('no S3 error was thrown');
}

/**
 * Each S3 rule of issue #41 (3) with a value it refuses, and the answer of its one owner in the object
 * model. test/gateway/rule-owners.test.ts sends these through the gateway (its handlers over the fake
 * object layer), test/data-plane/rule-owners.test.ts straight to the object layer's internal API: both
 * must give this very answer.
 */
export const OWNER_ANSWERS = {
  /** A PutObject with If-Match onto a key that has no object. */
  ifMatchMissing: (key: string) => answerOf(() => checkWriteConditions({ ifMatch: '"0123"' }, undefined, key)),
  /** PutObject / UploadPart declaring 6 GiB. */
  tooLarge: () => answerOf(() => checkObjectSize(6 * 1024 ** 3)),
  /** UploadPart / GetObject `partNumber` past 10000. */
  partNumberTooHigh: () => answerOf(() => checkPartNumber(10001)),
  /** CompleteMultipartUpload listing no part. */
  noParts: (uploadId: string) => answerOf(() => checkPartOrder([], uploadId)),
  /** CompleteMultipartUpload listing part 0. */
  partZero: (uploadId: string) => answerOf(() => checkPartOrder([{ partNumber: 0 }], uploadId)),
  /** CompleteMultipartUpload listing parts 2, 1. */
  outOfOrder: (uploadId: string) => answerOf(() => checkPartOrder([{ partNumber: 2 }, { partNumber: 1 }], uploadId)),
  /** UploadPartCopy with an x-amz-copy-source-range of no known form. */
  copyRangeForm: () => answerOf(() => readCopySourceRange('bytes=nonsense')),
  /** An instant upload whose x-service-md5 is not 32 hex digits. */
  instantMd5Form: () => answerOf(() => readInstantMd5('xyz')),
  /** ListParts' max-parts that is no number. */
  maxPartsForm: () => answerOf(() => readPageSize('abc', 'max-parts')),
  /** ListObjects' max-keys that is no number. */
  maxKeysForm: () => answerOf(() => readPageSize('abc', 'max-keys')),
};
