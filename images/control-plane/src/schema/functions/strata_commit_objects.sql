-- The data plane's commit of new object versions (PUT, copy, multipart completion) in ONE statement and
-- one transaction: a batch of N >= 1 items (a single commit is a batch of one; on embedded PGlite the
-- data plane gathers concurrent commits into one batch, images/data-plane/src/catalog/group-commit.ts).
-- p_items: a JSON array of items (strata_commit_items names their fields). One row per item (not always
-- in item order), r_index its 1-based position: r_status 'ok', or, where the item changed nothing,
-- 'no_bucket' (its bucket is gone), 'blob_gone' (the existing blob it names is being freed), 'changed'
-- (a conditional item whose key's current version is no longer the one it expects) or 'swept' (the orphan
-- sweep fenced and deleted the new file it names, see swept_locators); r_blob_id and
-- r_locator the blob it references (the locator only where it brought new content: its own when that
-- content was not stored yet); r_replaced_size the size of the version it replaced;
-- r_unreferenced_blob_id a blob left without references, for the data plane's collector.
--
-- Set-based: each statement handles every item at once, and statements are few, since on PGlite each one
-- costs the Node.js thread the same whatever its rows. The items are expanded from the JSON once, into an
-- array that each statement reads: an expansion costs PGlite ~35 µs plus ~4 µs per item, and ten of them
-- were ~15 % of the batch. Every reference is taken before any is released, so a blob that one item
-- releases and another references stays. A key written more than once in a batch is applied in waves (the
-- n-th write of each key in the n-th call), each write replacing the one before.
CREATE FUNCTION strata_commit_objects(p_items jsonb)
RETURNS TABLE (r_index bigint, r_status text, r_blob_id bigint, r_locator text, r_replaced_size bigint, r_unreferenced_blob_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
  -- The items (strata_commit_items), expanded from p_items once.
  v_items strata_commit_item[];
  v_repeated boolean;
  v_instant boolean;
  v_conditional boolean;
  v_wave bigint[];
  v_alive integer[];
  v_changed bigint[] := '{}';
  v_swept bigint[];
  v_skipped bigint[];
  v_kept bigint[] := '{}';
  -- Items that commit: position, blob, and the blob's locator where the item brought new content.
  v_ok_idx bigint[];
  v_ok_blob bigint[];
  v_ok_locator text[];
  v_ok_bucket integer[];
  v_ok_key text[];
  v_ok_now timestamptz[];
  -- Versions replaced: by which item, their blob and size.
  v_old_idx bigint[];
  v_old_blob bigint[];
  v_old_size bigint[];
  v_unreferenced bigint[];
BEGIN
  -- A batch of one (every commit on PostgreSQL, most on PGlite) takes the plain statements of strata_commit_one.
  IF jsonb_array_length(p_items) = 1 THEN
    RETURN QUERY SELECT * FROM strata_commit_one(p_items);
    RETURN;
  END IF;
  v_items := ARRAY(SELECT i FROM strata_commit_items(p_items) i);

  -- Writers of one key queue on its advisory lock before touching any blob row (taken in one order, so
  -- two batches cannot deadlock); then the buckets are share-locked against a concurrent bucket delete.
  SELECT c.repeated, c.instant, c.conditional,
    (SELECT coalesce(array_agg(b.id), '{}') FROM (SELECT buckets.id FROM buckets
       WHERE buckets.id IN (SELECT i.bucket_id FROM unnest(v_items) i) ORDER BY buckets.id FOR SHARE) b)
  INTO v_repeated, v_instant, v_conditional, v_alive
  FROM (SELECT count(*) <> count(DISTINCT (i.bucket_id, i.key)) AS repeated,
          coalesce(bool_or(i.existing_blob_id IS NOT NULL), false) AS instant,
          coalesce(bool_or(i.conditional), false) AS conditional,
          (SELECT count(l.locked) FROM (SELECT pg_advisory_xact_lock(j.bucket_id, hashtext(j.key)) AS locked
             FROM unnest(v_items) j ORDER BY j.bucket_id, hashtext(j.key)) l) AS locks
        FROM unnest(v_items) i) c;

  IF v_repeated THEN
    FOR v_wave IN
      SELECT array_agg(w.idx ORDER BY w.idx) FROM (SELECT i.idx, row_number() OVER (PARTITION BY i.bucket_id, i.key ORDER BY i.idx) AS n
        FROM unnest(v_items) i) w GROUP BY w.n ORDER BY w.n
    LOOP
      RETURN QUERY SELECT v_wave[c.r_index::int], c.r_status, c.r_blob_id, c.r_locator, c.r_replaced_size, c.r_unreferenced_blob_id
        FROM strata_commit_objects((SELECT jsonb_agg(p_items -> (x.idx::int - 1) ORDER BY x.n) FROM unnest(v_wave) WITH ORDINALITY AS x(idx, n))) c;
    END LOOP;
    RETURN;
  END IF;

  -- Conditional items whose key's current version is not the one they expect.
  IF v_conditional THEN
    SELECT coalesce(array_agg(i.idx), '{}') INTO v_changed FROM unnest(v_items) i
    WHERE i.conditional AND i.bucket_id = ANY (v_alive) AND i.current_etag IS DISTINCT FROM
      (SELECT o.etag FROM object_info o WHERE o.bucket_id = i.bucket_id AND (o.bucket_id % 2) = (i.bucket_id % 2) AND o.key = i.key AND o.state = 'NORMAL');
  END IF;

  -- New files the orphan sweep fenced (swept_locators) may be gone: their items commit nothing. The sweep
  -- holds a locator's exclusive advisory lock while it fences it, a commit the shared one from here to
  -- its end (strata_locator_lock_key), and each reads the other's rows in a later statement (a newer
  -- snapshot): either the sweep sees this commit's blob row and keeps the file, or this commit sees the fence.
  PERFORM count(pg_advisory_xact_lock_shared(l.h)) FROM (SELECT DISTINCT strata_locator_lock_key(i.backend_key, i.locator) AS h
    FROM unnest(v_items) i WHERE i.existing_blob_id IS NULL AND i.locator IS NOT NULL ORDER BY 1) l;
  SELECT coalesce(array_agg(i.idx), '{}') INTO v_swept FROM unnest(v_items) i
  WHERE i.existing_blob_id IS NULL AND EXISTS (SELECT 1 FROM swept_locators s WHERE s.backend_key = i.backend_key AND s.locator = i.locator);
  v_skipped := v_changed || v_swept;

  -- Instant uploads and copies: their existing blobs, if still LIVE, take one reference per item.
  IF v_instant THEN
    WITH wanted AS (
      SELECT i.existing_blob_id AS id, count(*)::int AS n FROM unnest(v_items) i
      WHERE i.existing_blob_id IS NOT NULL AND i.bucket_id = ANY (v_alive) AND NOT (i.idx = ANY (v_skipped)) GROUP BY 1
    ), counted AS (
      UPDATE blobs SET ref_count = blobs.ref_count + wanted.n FROM wanted
      WHERE blobs.id = wanted.id AND blobs.state = 'LIVE' RETURNING blobs.id
    )
    SELECT coalesce(array_agg(counted.id), '{}') INTO v_kept FROM counted;
  END IF;

  -- New content: one row per (backend, md5, size) with its first item's locator and bytes, or, where
  -- the content is stored already, its row takes the references; content without an MD5 has no identity
  -- and gets a row per item. Then each committing item's blob, and its owner's reference.
  WITH stored AS (
    INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count, created_at, data)
    SELECT DISTINCT ON (i.backend_key, i.blob_md5, i.blob_size, CASE WHEN i.blob_md5 IS NULL THEN i.idx END)
      i.backend_key, i.backend, i.locator, i.blob_md5, i.blob_size,
      count(*) OVER (PARTITION BY i.backend_key, i.blob_md5, i.blob_size, CASE WHEN i.blob_md5 IS NULL THEN i.idx END),
      i.now, decode(p_items -> (i.idx::int - 1) ->> 'data', 'base64')
    FROM unnest(v_items) i
    WHERE i.existing_blob_id IS NULL AND i.bucket_id = ANY (v_alive) AND NOT (i.idx = ANY (v_skipped))
    ORDER BY i.backend_key, i.blob_md5, i.blob_size, CASE WHEN i.blob_md5 IS NULL THEN i.idx END, i.idx
    ON CONFLICT (backend_key, md5, size) WHERE md5 IS NOT NULL AND state = 'LIVE'
    DO UPDATE SET ref_count = blobs.ref_count + excluded.ref_count
    RETURNING blobs.id, blobs.locator, blobs.backend_key, blobs.md5, blobs.size
  ), ok AS (
    SELECT i.idx, coalesce(i.existing_blob_id, s.id) AS blob_id, s.locator, i.bucket_id, i.key, i.now, i.owner
    FROM unnest(v_items) i
    LEFT JOIN stored s ON i.existing_blob_id IS NULL AND s.backend_key = i.backend_key AND s.size = i.blob_size
      AND (s.md5 = i.blob_md5 OR (i.blob_md5 IS NULL AND s.locator = i.locator))
    WHERE i.bucket_id = ANY (v_alive) AND NOT (i.idx = ANY (v_skipped)) AND (i.existing_blob_id IS NULL OR i.existing_blob_id = ANY (v_kept))
  ), owned AS (
    INSERT INTO blob_owners (blob_id, owner, ref_count)
    SELECT ok.blob_id, ok.owner, count(*) FROM ok GROUP BY 1, 2
    ON CONFLICT (blob_id, owner) DO UPDATE SET ref_count = blob_owners.ref_count + excluded.ref_count
  )
  SELECT coalesce(array_agg(ok.idx), '{}'), array_agg(ok.blob_id), array_agg(ok.locator),
    coalesce(array_agg(ok.bucket_id), '{}'), coalesce(array_agg(ok.key), '{}'), array_agg(ok.now)
  INTO v_ok_idx, v_ok_blob, v_ok_locator, v_ok_bucket, v_ok_key, v_ok_now
  FROM ok;

  -- The replaced versions (overwritten versions do not go to the recycle bin) release their references,
  -- in one statement (which reads the blobs' counts as they were before it): an inline blob that only
  -- they referenced goes with its bytes (its owner rows cascade); the others are counted down, and those
  -- left at zero are reported for the collector. The live-key index is probed with the batch's buckets
  -- and keys as arrays, then the exact pairs kept: one plan fits every batch.
  WITH replaced AS (
    UPDATE object_info SET state = 'DELETED', deleted_at = r.now
    FROM unnest(v_ok_idx, v_ok_bucket, v_ok_key, v_ok_now) AS r(idx, bucket_id, key, now)
    WHERE object_info.bucket_id = ANY (v_ok_bucket) AND object_info.key = ANY (v_ok_key) AND object_info.state = 'NORMAL'
      AND object_info.bucket_id = r.bucket_id AND object_info.key = r.key
    RETURNING r.idx, object_info.blob_id, object_info.owner, object_info.size
  ), released AS (
    SELECT x.blob_id, count(*)::int AS n, (b.ref_count = count(*) AND b.data IS NOT NULL) AS frees
    FROM replaced x JOIN blobs b ON b.id = x.blob_id GROUP BY x.blob_id, b.ref_count, (b.data IS NOT NULL)
  ), freed AS (
    DELETE FROM blobs USING released WHERE blobs.id = released.blob_id AND released.frees
  ), counted AS (
    UPDATE blobs SET ref_count = GREATEST(blobs.ref_count - released.n, 0) FROM released
    WHERE blobs.id = released.blob_id AND NOT released.frees RETURNING blobs.id, blobs.ref_count
  ), owners AS (
    UPDATE blob_owners SET ref_count = GREATEST(blob_owners.ref_count - o.n, 0)
    FROM (SELECT x.blob_id, x.owner, count(*)::int AS n FROM replaced x GROUP BY 1, 2) o
    JOIN released ON released.blob_id = o.blob_id AND NOT released.frees
    WHERE blob_owners.blob_id = o.blob_id AND blob_owners.owner = o.owner
  )
  SELECT array_agg(replaced.idx), array_agg(replaced.blob_id), array_agg(replaced.size),
    (SELECT array_agg(counted.id) FROM counted WHERE counted.ref_count = 0)
  INTO v_old_idx, v_old_blob, v_old_size, v_unreferenced FROM replaced;

  -- The new versions and their events; the answer per item. A blob left unreferenced is reported
  -- once, by the last item that released it.
  RETURN QUERY
  WITH created AS (
    INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, user_metadata, owner, last_modified,
      tags, headers, part_sizes, part_checksums)
    SELECT i.bucket_id, i.key, 'NORMAL', r.blob_id, i.size, i.etag, i.md5, i.content_type, i.user_metadata, i.owner, i.now,
      i.tags, i.headers, i.part_sizes, i.part_checksums
    FROM unnest(v_items) i JOIN unnest(v_ok_idx, v_ok_blob) AS r(idx, blob_id) ON r.idx = i.idx
    ORDER BY i.idx
  ), events AS (
    INSERT INTO outbox (event_id, type, payload, created_at)
    SELECT i.event_id, 'object.created', i.payload || jsonb_build_object('replacedSize', o.size), i.now
    FROM unnest(v_items) i LEFT JOIN unnest(v_old_idx, v_old_size) AS o(idx, size) ON o.idx = i.idx
    WHERE i.idx = ANY (v_ok_idx)
    ORDER BY i.idx
  )
  SELECT i.idx,
    CASE WHEN NOT (i.bucket_id = ANY (v_alive)) THEN 'no_bucket' WHEN i.idx = ANY (v_changed) THEN 'changed'
      WHEN i.idx = ANY (v_swept) THEN 'swept'
      WHEN r.idx IS NULL THEN 'blob_gone' ELSE 'ok' END,
    r.blob_id, r.locator, o.size, u.blob_id
  FROM unnest(v_items) i
  LEFT JOIN unnest(v_ok_idx, v_ok_blob, v_ok_locator) AS r(idx, blob_id, locator) ON r.idx = i.idx
  LEFT JOIN unnest(v_old_idx, v_old_size) AS o(idx, size) ON o.idx = i.idx
  LEFT JOIN (SELECT max(x.idx) AS idx, x.blob_id FROM unnest(v_old_idx, v_old_blob) AS x(idx, blob_id)
             WHERE x.blob_id = ANY (v_unreferenced) GROUP BY x.blob_id) u ON u.idx = i.idx
  ORDER BY i.idx;
END;
$$;
