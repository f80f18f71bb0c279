-- A multipart object's parts: their sizes in part order (GetObject/HeadObject `partNumber` answers one
-- part's bytes and the parts' count) and, for an upload with a checksum algorithm, their checksums
-- (GetObjectAttributes lists them). NULL for an object uploaded whole. Written only by multipart
-- completion (and copies of its object), which commits through the transaction path, not the commit
-- functions: completions are rare, and the functions' bodies need not be defined again for two columns.
ALTER TABLE object_info ADD COLUMN IF NOT EXISTS part_sizes bigint[];
ALTER TABLE object_info ADD COLUMN IF NOT EXISTS part_checksums text[];
