-- ListBuckets reads one owner's buckets a page at a time, in name order (COLLATE "C", the column's): without
-- an index on the owner every page scanned the whole table (16.6 ms at 200 000 buckets of 1 000 owners on
-- PostgreSQL 15, 0.46 ms with this one; hack/bench/measurements.md, "ListBuckets").
CREATE INDEX buckets_owner_name ON buckets (owner, name);
