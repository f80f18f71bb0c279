import { MAX_LOGGING_PREFIX_BYTES, PARTITION_DATE_SOURCES, S3Error, type LoggingRule } from '../../../object-model/src/index.js';
import { malformedXml, xmlGroup, xmlText } from './xml.js';

/**
 * S3's `BucketLoggingStatus` ⇄ a bucket's logging rule. An empty status turns logging off (S3 has no
 * DeleteBucketLogging); a LoggingEnabled holds TargetBucket and TargetPrefix (empty allowed) and may hold a
 * TargetObjectKeyFormat of SimplePrefix or PartitionedPrefix (PartitionDateSource EventTime or DeliveryTime).
 * TargetGrants (grants on the log objects) are accepted and not kept, as radosgw does (Terraform and SDK configurations
 * that carry them still apply): GetBucketLogging answers without them, so a client sees they are not in effect.
 */
export function parseBucketLoggingStatus(doc: Record<string, unknown>): LoggingRule | undefined {
  const enabled = xmlGroup(doc.LoggingEnabled, 'LoggingEnabled');
  if (enabled === undefined) return undefined;
  const targetBucket = xmlText(enabled.TargetBucket, 'TargetBucket');
  if (!targetBucket) throw malformedXml('LoggingEnabled holds a TargetBucket.');
  const targetPrefix = xmlText(enabled.TargetPrefix, 'TargetPrefix');
  if (targetPrefix === undefined) throw malformedXml('LoggingEnabled holds a TargetPrefix (it may be empty).');
  if (Buffer.byteLength(targetPrefix) > MAX_LOGGING_PREFIX_BYTES)
    throw new S3Error('InvalidArgument', `TargetPrefix is longer than ${MAX_LOGGING_PREFIX_BYTES} bytes.`, { ArgumentName: 'TargetPrefix' });
  xmlGroup(enabled.TargetGrants, 'TargetGrants');
  const rule: LoggingRule = { targetBucket, targetPrefix };
  const format = xmlGroup(enabled.TargetObjectKeyFormat, 'TargetObjectKeyFormat');
  if (format !== undefined) {
    const simple = format.SimplePrefix !== undefined;
    const partitioned = xmlGroup(format.PartitionedPrefix, 'PartitionedPrefix');
    if (simple === (partitioned !== undefined)) throw malformedXml('TargetObjectKeyFormat holds one of SimplePrefix and PartitionedPrefix.');
    if (partitioned) {
      const source = xmlText(partitioned.PartitionDateSource, 'PartitionDateSource') ?? 'EventTime';
      if (!PARTITION_DATE_SOURCES.includes(source as NonNullable<LoggingRule['partitionDateSource']>))
        throw malformedXml('PartitionDateSource is EventTime or DeliveryTime.');
      rule.partitionDateSource = source as NonNullable<LoggingRule['partitionDateSource']>;
    }
  }
  return rule;
}

/** The BucketLoggingStatus document's body: empty when logging is off; the key format is always named (SimplePrefix by default). */
export function renderBucketLoggingStatus(rule: LoggingRule | undefined): Record<string, unknown> {
  if (!rule) return {};
  return {
    LoggingEnabled: {
      TargetBucket: rule.targetBucket,
      TargetPrefix: rule.targetPrefix,
      TargetObjectKeyFormat: rule.partitionDateSource ? { PartitionedPrefix: { PartitionDateSource: rule.partitionDateSource } } : { SimplePrefix: {} },
    },
  };
}
