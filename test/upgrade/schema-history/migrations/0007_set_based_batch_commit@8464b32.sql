-- Group commit, set-based: strata_commit_objects (migration 0004, bodies of 0006) applied its items one
-- after another, eight to ten statements each inside PL/pgSQL, ~0.4 ms per item on PGlite, most of the
-- PGlite thread's time under a small-PUT load. Here a batch of independent items is applied in about a
-- dozen statements whatever its size: each blob row takes the sum of its batch's references at once.
-- Items that depend on each other (one key written twice in the batch) or whose blob has no content
-- identity (no MD5) still go one by one, in order, through the old function, renamed. The result is
-- the same as applying the items in order (tested against it: test/data-plane/group-commit.test.ts).
ALTER FUNCTION strata_commit_objects(jsonb) RENAME TO strata_commit_objects_in_order;

-- The batch's items as rows (idx = the item's 1-based position). The inline bytes ('data') are read
-- only where a blob row is written.
CREATE OR REPLACE FUNCTION strata_commit_items(p_items jsonb)
RETURNS TABLE (idx bigint, bucket_id integer, key text, owner text, existing_blob_id bigint,
  backend_key text, backend jsonb, locator text, blob_md5 text, blob_size bigint,
  size bigint, etag text, md5 text, content_type text, user_metadata jsonb, now timestamptz,
  event_id text, payload jsonb)
LANGUAGE sql STABLE AS $$
  SELECT i.idx, i."bucketId", i.key, i.owner, i."existingBlobId", i."backendKey", i.backend, i.locator, i."blobMd5",
    i."blobSize", i.size, i.etag, i.md5, i."contentType", i."userMetadata", i.now, i."eventId", i.payload
  FROM ROWS FROM (jsonb_to_recordset(p_items) AS ("bucketId" integer, key text, owner text, "existingBlobId" bigint,
    "backendKey" text, backend jsonb, locator text, "blobMd5" text, "blobSize" bigint, size bigint, etag text, md5 text,
    "contentType" text, "userMetadata" jsonb, now timestamptz, "eventId" text, payload jsonb)) WITH ORDINALITY
    AS i("bucketId", key, owner, "existingBlobId", "backendKey", backend, locator, "blobMd5", "blobSize", size, etag, md5,
      "contentType", "userMetadata", now, "eventId", payload, idx)
$$;

CREATE OR REPLACE FUNCTION strata_commit_objects(p_items jsonb)
RETURNS TABLE (r_index bigint, r_status text, r_blob_id bigint, r_locator text, r_replaced_size bigint, r_unreferenced_blob_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_in_order boolean;
  v_instant boolean;
  v_alive integer[];
  v_kept bigint[] := '{}';
  -- Items that commit: position, blob, and the blob's locator where the item brought new content.
  v_ok_idx bigint[];
  v_ok_blob bigint[];
  v_ok_locator text[];
  -- Versions replaced: by which item, their blob, owner and size.
  v_old_idx bigint[];
  v_old_blob bigint[];
  v_old_owner text[];
  v_old_size bigint[];
  v_unreferenced bigint[];
BEGIN
  -- Statements are few on purpose: on PGlite each costs ~0.1-0.3 ms whatever its rows.
  -- The same locks as one by one (in one order, so two batches cannot deadlock), then the buckets.
  SELECT c.in_order, c.instant,
    (SELECT coalesce(array_agg(b.id), '{}') FROM (SELECT buckets.id FROM buckets
       WHERE buckets.id IN (SELECT i.bucket_id FROM strata_commit_items(p_items) i) ORDER BY buckets.id FOR SHARE) b)
  INTO v_in_order, v_instant, v_alive
  FROM (SELECT count(*) <> count(DISTINCT (i.bucket_id, i.key)) OR bool_or(i.existing_blob_id IS NULL AND i.blob_md5 IS NULL) AS in_order,
          bool_or(i.existing_blob_id IS NOT NULL) AS instant,
          (SELECT count(l.locked) FROM (SELECT pg_advisory_xact_lock(j.bucket_id, hashtext(j.key)) AS locked
             FROM strata_commit_items(p_items) j ORDER BY j.bucket_id, hashtext(j.key)) l) AS locks
        FROM strata_commit_items(p_items) i) c;
  IF v_in_order THEN
    RETURN QUERY SELECT * FROM strata_commit_objects_in_order(p_items);
    RETURN;
  END IF;

  -- Instant uploads and copies: their existing blobs, if still LIVE, take one reference per item.
  IF v_instant THEN
    WITH wanted AS (
      SELECT i.existing_blob_id AS id, count(*)::int AS n FROM strata_commit_items(p_items) i
      WHERE i.existing_blob_id IS NOT NULL AND i.bucket_id = ANY (v_alive) GROUP BY 1
    ), counted AS (
      UPDATE blobs SET ref_count = blobs.ref_count + wanted.n FROM wanted
      WHERE blobs.id = wanted.id AND blobs.state = 'LIVE' RETURNING blobs.id
    )
    SELECT coalesce(array_agg(counted.id), '{}') INTO v_kept FROM counted;
  END IF;

  -- New content: one row per (backend, md5, size) with its first item's locator and bytes, or, where
  -- the content is stored already, its row takes the references. Then each committing item's blob.
  WITH stored AS (
    INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count, created_at, data)
    SELECT DISTINCT ON (i.backend_key, i.blob_md5, i.blob_size) i.backend_key, i.backend, i.locator, i.blob_md5, i.blob_size,
      count(*) OVER (PARTITION BY i.backend_key, i.blob_md5, i.blob_size), i.now, decode(p_items -> (i.idx::int - 1) ->> 'data', 'base64')
    FROM strata_commit_items(p_items) i
    WHERE i.existing_blob_id IS NULL AND i.bucket_id = ANY (v_alive)
    ORDER BY i.backend_key, i.blob_md5, i.blob_size, i.idx
    ON CONFLICT (backend_key, md5, size) WHERE md5 IS NOT NULL AND state = 'LIVE'
    DO UPDATE SET ref_count = blobs.ref_count + excluded.ref_count
    RETURNING blobs.id, blobs.locator, blobs.backend_key, blobs.md5, blobs.size
  )
  SELECT coalesce(array_agg(i.idx), '{}'), array_agg(coalesce(i.existing_blob_id, s.id)), array_agg(s.locator)
  INTO v_ok_idx, v_ok_blob, v_ok_locator
  FROM strata_commit_items(p_items) i
  LEFT JOIN stored s ON i.existing_blob_id IS NULL AND s.backend_key = i.backend_key AND s.md5 = i.blob_md5 AND s.size = i.blob_size
  WHERE i.bucket_id = ANY (v_alive) AND (i.existing_blob_id IS NULL OR i.existing_blob_id = ANY (v_kept));

  -- The owners' references; the replaced versions (overwritten versions do not go to the recycle bin).
  WITH owned AS (
    INSERT INTO blob_owners (blob_id, owner, ref_count)
    SELECT r.blob_id, i.owner, count(*) FROM strata_commit_items(p_items) i JOIN unnest(v_ok_idx, v_ok_blob) AS r(idx, blob_id) ON r.idx = i.idx
    GROUP BY 1, 2
    ON CONFLICT (blob_id, owner) DO UPDATE SET ref_count = blob_owners.ref_count + excluded.ref_count
  ), replaced AS (
    UPDATE object_info SET state = 'DELETED', deleted_at = i.now
    FROM strata_commit_items(p_items) i
    WHERE i.idx = ANY (v_ok_idx) AND object_info.bucket_id = i.bucket_id AND (object_info.bucket_id % 2) = (i.bucket_id % 2)
      AND object_info.key = i.key AND object_info.state = 'NORMAL'
    RETURNING i.idx, object_info.blob_id, object_info.owner, object_info.size
  )
  SELECT array_agg(replaced.idx), array_agg(replaced.blob_id), array_agg(replaced.owner), array_agg(replaced.size)
  INTO v_old_idx, v_old_blob, v_old_owner, v_old_size FROM replaced;

  -- The replaced versions release their references, in one statement (both branches read the counts
  -- as they were before it): an inline blob that only they referenced goes with its bytes (its owner
  -- rows cascade); the others are counted down, and those left at zero are reported for the collector.
  IF v_old_idx IS NOT NULL THEN
    WITH released AS (
      SELECT x.blob_id, count(*)::int AS n, (b.ref_count = count(*) AND b.data IS NOT NULL) AS frees
      FROM unnest(v_old_blob) AS x(blob_id) JOIN blobs b ON b.id = x.blob_id GROUP BY x.blob_id, b.ref_count, (b.data IS NOT NULL)
    ), freed AS (
      DELETE FROM blobs USING released WHERE blobs.id = released.blob_id AND released.frees
    ), counted AS (
      UPDATE blobs SET ref_count = GREATEST(blobs.ref_count - released.n, 0) FROM released
      WHERE blobs.id = released.blob_id AND NOT released.frees RETURNING blobs.id, blobs.ref_count
    ), owners AS (
      UPDATE blob_owners SET ref_count = GREATEST(blob_owners.ref_count - o.n, 0)
      FROM (SELECT x.blob_id, x.owner, count(*)::int AS n FROM unnest(v_old_blob, v_old_owner) AS x(blob_id, owner) GROUP BY 1, 2) o
      JOIN released ON released.blob_id = o.blob_id AND NOT released.frees
      WHERE blob_owners.blob_id = o.blob_id AND blob_owners.owner = o.owner
    )
    SELECT array_agg(counted.id) INTO v_unreferenced FROM counted WHERE counted.ref_count = 0;
  END IF;

  -- The new versions and their events; the answer per item. A blob left unreferenced is reported
  -- once, by the last item that released it.
  RETURN QUERY
  WITH created AS (
    INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, user_metadata, owner, last_modified)
    SELECT i.bucket_id, i.key, 'NORMAL', r.blob_id, i.size, i.etag, i.md5, i.content_type, i.user_metadata, i.owner, i.now
    FROM strata_commit_items(p_items) i JOIN unnest(v_ok_idx, v_ok_blob) AS r(idx, blob_id) ON r.idx = i.idx
    ORDER BY i.idx
  ), events AS (
    INSERT INTO outbox (event_id, type, payload, created_at)
    SELECT i.event_id, 'object.created', i.payload || jsonb_build_object('replacedSize', o.size), i.now
    FROM strata_commit_items(p_items) i LEFT JOIN unnest(v_old_idx, v_old_size) AS o(idx, size) ON o.idx = i.idx
    WHERE i.idx = ANY (v_ok_idx)
    ORDER BY i.idx
  )
  SELECT i.idx,
    CASE WHEN NOT (i.bucket_id = ANY (v_alive)) THEN 'no_bucket' WHEN r.idx IS NULL THEN 'blob_gone' ELSE 'ok' END,
    r.blob_id, r.locator, o.size, u.blob_id
  FROM strata_commit_items(p_items) i
  LEFT JOIN unnest(v_ok_idx, v_ok_blob, v_ok_locator) AS r(idx, blob_id, locator) ON r.idx = i.idx
  LEFT JOIN unnest(v_old_idx, v_old_size) AS o(idx, size) ON o.idx = i.idx
  LEFT JOIN (SELECT max(x.idx) AS idx, x.blob_id FROM unnest(v_old_idx, v_old_blob) AS x(idx, blob_id)
             WHERE x.blob_id = ANY (v_unreferenced) GROUP BY x.blob_id) u ON u.idx = i.idx
  ORDER BY i.idx;
END;
$$;
