-- Server-side encryption: a bucket's default encryption (PutBucketEncryption), a JSON array of one rule
-- {algorithm, kmsKeyId?, bucketKeyEnabled?}; NULL when it has none. Objects' own encryption records are
-- kept in object_info.headers (an entry the data plane never answers), so object rows need no column.
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS encryption jsonb;
