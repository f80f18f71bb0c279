-- The data plane's orphan sweep asks which blob files on a backend a row still names (by locator);
-- without this index each of its batches would scan the whole blobs table.
CREATE INDEX IF NOT EXISTS blobs_by_locator ON blobs (backend_key, locator);
