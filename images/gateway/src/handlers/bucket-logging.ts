import { S3Error, type BucketInfo, type LoggingRule } from '../../../object-model/src/index.js';
import { callerOf, type Caller } from '../context.js';
import type { GatewayDeps } from '../deps.js';
import { parseBucketLoggingStatus, renderBucketLoggingStatus } from '../s3/logging-xml.js';
import type { S3Handler } from '../s3/operation.js';
import { readCheckedDocument } from '../s3/request.js';
import { sendStatus, sendXml } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';

/**
 * The target a logging rule names, as S3 checks it: a bucket that exists and has the source bucket's owner
 * (InvalidTargetBucketForLogging otherwise, with one message for both, so that no tenant learns whether
 * another's bucket exists). The source bucket itself may be its own target, as on S3; its log writes are
 * never logged. No grant is needed on the target: the gateway writes the log objects for their owner.
 */
async function checkTarget(deps: GatewayDeps, rule: LoggingRule, caller: Caller): Promise<BucketInfo> {
  let target: BucketInfo;
  try {
    target = await deps.buckets.existing(rule.targetBucket);
  } catch (err) {
    if (err instanceof S3Error && err.code === 'NoSuchBucket')
      throw new S3Error('InvalidTargetBucketForLogging', undefined, { TargetBucket: rule.targetBucket });
    throw err;
  }
  if (target.owner !== caller.username) throw new S3Error('InvalidTargetBucketForLogging', undefined, { TargetBucket: rule.targetBucket });
  return target;
}

/** PutBucketLogging / GetBucketLogging (`?logging`), the bucket owner's only. An empty BucketLoggingStatus turns logging off. */
export const bucketLogging: Record<'put' | 'get', S3Handler> = {
  put: async ({ req, res, bucket, deps }) => {
    const body = await readCheckedDocument(req, res);
    const caller = callerOf(res);
    await deps.buckets.owned(bucket, caller);
    const rule = parseBucketLoggingStatus(parseXml<Record<string, unknown>>(body.toString('utf8'), 'BucketLoggingStatus'));
    if (rule) await checkTarget(deps, rule, caller);
    await deps.objects.putBucketConfig(bucket, 'logging', rule ? [rule] : undefined);
    deps.buckets.forget(bucket);
    sendStatus(res, 200);
  },
  get: async ({ res, bucket, deps }) => {
    await deps.buckets.owned(bucket, callerOf(res));
    const [rule] = await deps.objects.getBucketConfig(bucket, 'logging');
    sendXml(res, 'BucketLoggingStatus', renderBucketLoggingStatus(rule));
  },
};
