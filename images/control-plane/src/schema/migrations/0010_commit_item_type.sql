-- One item of a strata_commit_objects batch as a row (functions/strata_commit_items.sql names and reads
-- the fields from the batch's JSON). strata_commit_objects expands its items once into an array of this
-- type and each of its statements reads that array: an expansion from JSON costs PGlite ~35 µs plus
-- ~4 µs per item, and with the array a batch costs ~10 % less (hack/bench/measurements.md, commit-fn).
CREATE TYPE strata_commit_item AS (
  idx bigint, bucket_id integer, key text, owner text, existing_blob_id bigint,
  backend_key text, backend jsonb, locator text, blob_md5 text, blob_size bigint,
  size bigint, etag text, md5 text, content_type text, user_metadata jsonb, now timestamptz,
  event_id text, payload jsonb, tags jsonb, headers jsonb, part_sizes bigint[], part_checksums text[],
  conditional boolean, current_etag text
);
