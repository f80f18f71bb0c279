import type { Request } from 'express';
import { BUCKET_HEADER, readWireHeader, S3Error } from '../../../object-model/src/index.js';
import type { BucketKey, BucketStore } from '../metadata/store.js';

/**
 * The bucket a request is about (hack/adr/0007-bucket-resolution.md). With x-strata-bucket, the record
 * the gateway resolved and authorised the request against: that bucket, by its row id, and no lookup
 * (one resolution per request). Without it, the name's current bucket, read from the database.
 *
 * A record may be stale: its bucket deleted since, the name perhaps another bucket's by now. Work done
 * by the record's id touches no other bucket (the rule PutObject follows); it finds nothing there, and
 * `confirm`, asked whenever an operation found nothing, turns that into NoSuchBucket. No writer is
 * named on these calls, so none falls through to the name's new bucket as a PutObject by its owner does.
 */
export class RequestBuckets {
  constructor(private readonly buckets: Pick<BucketStore, 'get' | 'exists'>) {}

  /** The request's bucket: its record, which must name `name`, or the name's current bucket (NoSuchBucket). */
  async of(req: Request, name: string): Promise<BucketKey> {
    const record = readWireHeader(BUCKET_HEADER, req.header(BUCKET_HEADER.name));
    if (record) {
      if (record.name !== name) throw new S3Error('InvalidArgument', `${BUCKET_HEADER.name} names bucket ${record.name}, not ${name}.`);
      return { id: record.id, name: record.name, owner: record.owner };
    }
    const bucket = await this.buckets.get(name);
    if (!bucket) throw new S3Error('NoSuchBucket', undefined, { BucketName: name });
    return bucket;
  }

  /** An operation on `bucket` found nothing (no such key, an empty page): NoSuchBucket when the bucket itself is gone. */
  async confirm(bucket: BucketKey): Promise<void> {
    if (!(await this.buckets.exists(bucket.id))) throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
  }
}
