-- A bucket's lifecycle configuration (PutBucketLifecycleConfiguration): a JSON array of rules
-- (service-kit/src/bucket-lifecycle.ts), NULL when the bucket has none. Applied by the daily job.
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS lifecycle jsonb;
