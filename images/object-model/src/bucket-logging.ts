/**
 * A bucket's server access logging (PutBucketLogging's LoggingEnabled): the gateway writes one S3 access-log
 * line per request to the bucket into log objects of `targetBucket` (same owner), keyed from `targetPrefix`.
 */
export interface LoggingRule {
  targetBucket: string;
  /** Prepended to every log object's key (may be empty). */
  targetPrefix: string;
  /**
   * TargetObjectKeyFormat: absent, SimplePrefix (`<prefix>YYYY-mm-DD-HH-MM-SS-<unique>`); else PartitionedPrefix
   * (`<prefix><owner>/<region>/<bucket>/YYYY/mm/DD/YYYY-mm-DD-HH-MM-SS-<unique>`), its date the records' (EventTime)
   * or the delivery's (DeliveryTime).
   */
  partitionDateSource?: 'EventTime' | 'DeliveryTime';
}

export const PARTITION_DATE_SOURCES: ReadonlyArray<NonNullable<LoggingRule['partitionDateSource']>> = ['EventTime', 'DeliveryTime'];

/** The longest TargetPrefix kept (a log object's key must stay within S3's 1024 bytes). */
export const MAX_LOGGING_PREFIX_BYTES = 512;
