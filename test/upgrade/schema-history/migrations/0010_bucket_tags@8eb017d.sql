-- A bucket's tags (PutBucketTagging): a JSON array of {key, value}, NULL when it has none.
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS tags jsonb;
