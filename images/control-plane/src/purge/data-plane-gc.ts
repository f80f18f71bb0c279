import { BLOBS_FREED_ANSWER, BUCKET_HEADER, encodeWireHeader, readAnswer, UPLOADS_ABORTED_ANSWER, type AnswerSchema } from '../../../object-model/src/index.js';
import type { Bucket, BucketKey } from '../metadata/store.js';
import type { UploadExpirer } from './lifecycle-job.js';

/** Asks the data plane to free the bytes of blobs nothing references any more. */
export interface BlobCollector {
  collect(blobIds: number[]): Promise<number>;
}

/**
 * A call (POST with a JSON body, else DELETE) to the data plane's internal API, its answer read by
 * `answer` (one of another shape: InternalError naming the field); undefined when the data plane's
 * address is not known (yet).
 */
async function callDataPlane<T>(
  base: string | undefined,
  internalToken: string,
  path: string,
  body: unknown,
  what: string,
  answer: AnswerSchema<T>,
  headers: Record<string, string> = {},
): Promise<T | undefined> {
  if (!base) return undefined;
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? 'DELETE' : 'POST',
    headers: { ...headers, 'content-type': 'application/json', 'x-strata-internal-token': internalToken },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`data plane ${what} answered ${res.status}: ${await res.text()}`);
  const text = await res.text();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = text;
  }
  return readAnswer(answer, value, `the data plane (${what})`);
}

/** The data plane's `POST /internal/blobs/gc` over HTTP; without a URL nothing is freed now (its own sweep will). */
export class HttpBlobCollector implements BlobCollector {
  constructor(
    private readonly dataPlaneUrl: () => string | undefined,
    private readonly internalToken: string,
  ) {}

  async collect(blobIds: number[]): Promise<number> {
    if (blobIds.length === 0) return 0;
    const r = await callDataPlane(this.dataPlaneUrl(), this.internalToken, '/internal/blobs/gc', { blobIds }, 'blob GC', BLOBS_FREED_ANSWER);
    return r?.freed ?? 0;
  }
}

/**
 * The data plane's `POST /internal/multipart-expiry/:bucket` and `DELETE /internal/bucket-uploads/:bucketId`
 * over HTTP; without a URL nothing is aborted now (the uploads' TTL still ends them).
 */
export class HttpUploadExpirer implements UploadExpirer {
  constructor(
    private readonly dataPlaneUrl: () => string | undefined,
    private readonly internalToken: string,
  ) {}

  /** The bucket goes as its record (x-strata-bucket, its backend's kind only): the data plane aborts that bucket's uploads. */
  async expireUploads(bucket: BucketKey & Pick<Bucket, 'backend'>, prefix: string, initiatedNoLaterThan: Date): Promise<number> {
    const { id, name, owner } = bucket;
    const r = await callDataPlane(
      this.dataPlaneUrl(),
      this.internalToken,
      `/internal/multipart-expiry/${encodeURIComponent(name)}`,
      { prefix, initiatedNoLaterThan: initiatedNoLaterThan.toISOString() },
      'upload expiry',
      UPLOADS_ABORTED_ANSWER,
      { [BUCKET_HEADER.name]: encodeWireHeader(BUCKET_HEADER, { id, name, owner, backend: { kind: bucket.backend.kind } }) },
    );
    return r?.aborted ?? 0;
  }

  async abortBucketUploads(bucketId: number): Promise<number> {
    const r = await callDataPlane(
      this.dataPlaneUrl(),
      this.internalToken,
      `/internal/bucket-uploads/${bucketId}`,
      undefined,
      "abort of a deleted bucket's uploads",
      UPLOADS_ABORTED_ANSWER,
    );
    return r?.aborted ?? 0;
  }
}
