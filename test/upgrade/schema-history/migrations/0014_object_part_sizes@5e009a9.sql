-- A multipart object's part sizes in part order (GetObject/HeadObject `partNumber` answers one part's
-- bytes and the parts' count); NULL for an object uploaded whole. Written only by multipart
-- completion, which commits through the transaction path (not the commit functions: completions are
-- rare, and the functions' bodies need not be defined a fourth time for one column).
ALTER TABLE object_info ADD COLUMN IF NOT EXISTS part_sizes bigint[];
