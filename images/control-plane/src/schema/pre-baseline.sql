-- Brings the schema of a build from before the baseline (0.1.0 and earlier: schema_migrations records
-- some of PRE_BASELINE_VERSIONS in migrate.ts, never 0001_baseline) to exactly the baseline's tables.
-- Those builds applied 0001_object_store ... 0014_object_part_sizes in order, so a database holds the
-- tables of the first N of them; every later one only added columns, tables and indexes, and two were
-- edited after they shipped (0006 set the inline bytes' storage MAIN in some builds, EXTERNAL in others;
-- 0014 added part_checksums only in its second form). Each statement below is one of those additions
-- in their order, idempotent, so a schema of any of them ends with the baseline's columns in the
-- baseline's order (test/upgrade/schema-history.test.ts compares the catalogs of every recorded
-- history with a fresh baseline's). The stored functions those builds defined are all strata_ ones:
-- migrate.ts drops them and defines functions/ again, as on every start.

-- 0002_blobs_by_locator
CREATE INDEX IF NOT EXISTS blobs_by_locator ON blobs (backend_key, locator);

-- 0005_bucket_name_hold
CREATE TABLE IF NOT EXISTS bucket_name_holds (
  name       text COLLATE "C" PRIMARY KEY,
  owner      text NOT NULL,
  deleted_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS bucket_name_holds_deleted_at ON bucket_name_holds (deleted_at);

-- 0006_inline_blobs (EXTERNAL whichever form ran; rows stored MAIN stay readable, new ones go EXTERNAL)
ALTER TABLE blobs ADD COLUMN IF NOT EXISTS data bytea;
ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL;

-- 0008_bucket_lifecycle, 0009_bucket_cors, 0010_bucket_tags
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS lifecycle jsonb;
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS cors jsonb;
ALTER TABLE buckets ADD COLUMN IF NOT EXISTS tags jsonb;

-- 0011_object_tags, 0012_object_headers, 0014_object_part_sizes (both forms)
ALTER TABLE object_info ADD COLUMN IF NOT EXISTS tags jsonb;
ALTER TABLE object_info ADD COLUMN IF NOT EXISTS headers jsonb;
ALTER TABLE object_info ADD COLUMN IF NOT EXISTS part_sizes bigint[];
ALTER TABLE object_info ADD COLUMN IF NOT EXISTS part_checksums text[];
