import { callerOf } from '../context.js';
import { parseLifecycleConfiguration, renderLifecycleConfiguration, type LifecycleConfigurationXml } from '../s3/lifecycle-xml.js';
import type { S3Handler } from '../s3/operation.js';
import { discard, readCheckedDocument } from '../s3/request.js';
import { sendXml } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';

/**
 * PutBucketLifecycleConfiguration: replaces the bucket's rules. As S3, the document must come with
 * Content-MD5 or a flexible checksum; the rules are applied by the daily job (03:00, with the purge).
 */
export const putBucketLifecycle: S3Handler = async ({ req, res, bucket, deps }) => {
  const body = await readCheckedDocument(req, res, { required: true });
  await deps.buckets.owned(bucket, callerOf(res));
  const rules = parseLifecycleConfiguration(parseXml<LifecycleConfigurationXml>(body.toString('utf8'), 'LifecycleConfiguration'));
  await deps.controlPlane.putBucketLifecycle(bucket, rules);
  deps.buckets.forget(bucket); // this gateway's x-amz-expiration follows at once (others within their 2 s cache)
  res.status(200).end();
};

/** GetBucketLifecycleConfiguration: the rules as stored; NoSuchLifecycleConfiguration when there are none. */
export const getBucketLifecycle: S3Handler = async ({ res, bucket, deps }) => {
  await deps.buckets.owned(bucket, callerOf(res));
  sendXml(res, 'LifecycleConfiguration', renderLifecycleConfiguration(await deps.controlPlane.getBucketLifecycle(bucket)));
};

/** DeleteBucketLifecycle: 204 whether or not the bucket had rules. */
export const deleteBucketLifecycle: S3Handler = async ({ req, res, bucket, deps }) => {
  discard(req);
  await deps.buckets.owned(bucket, callerOf(res));
  await deps.controlPlane.putBucketLifecycle(bucket, undefined);
  deps.buckets.forget(bucket);
  res.status(204).end();
};
