-- A bucket's CORS configuration (PutBucketCors): a JSON array of rules (service-kit/src/bucket-cors.ts),
-- NULL when the bucket has none (the gateway's server-wide CORS policy then applies).
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS cors jsonb;
