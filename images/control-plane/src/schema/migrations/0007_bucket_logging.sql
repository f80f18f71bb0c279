-- Server access logging: a bucket's PutBucketLogging configuration, a JSON array of one rule
-- {targetBucket, targetPrefix, partitionDateSource?}; NULL when logging is off.
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS logging jsonb;
