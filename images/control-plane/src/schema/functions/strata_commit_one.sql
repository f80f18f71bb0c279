-- strata_commit_objects for a batch of ONE item (its fast path: strata_commit_objects calls it for such a
-- batch; same items, same answer). The set-based statements cost more for one item than plain statements
-- on its own key, as the single-item function before batches had (measured: hack/bench/measurements.md).
-- Same order of effects as the batch: the key's advisory lock, the bucket share-locked, the conditional
-- check, the locator's shared lock and the sweep's fence, the new reference taken, then the replaced
-- version's released, then the new version and its event.
CREATE FUNCTION strata_commit_one(p_items jsonb)
RETURNS TABLE (r_index bigint, r_status text, r_blob_id bigint, r_locator text, r_replaced_size bigint, r_unreferenced_blob_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v record;
  v_blob_id bigint;
  v_locator text;
  v_old_blob bigint;
  v_old_owner text;
  v_old_size bigint;
  v_old_refs integer;
  v_swept boolean;
  v_changed boolean;
BEGIN
  SELECT * INTO v FROM strata_commit_items(p_items) i;
  -- The key's lock, and for new content its locator's shared lock (the sweep's fence waits on no other
  -- lock while it holds one, so taking both at once cannot deadlock with it); the statement after reads
  -- the fence, the bucket (share-locked) and the key's current version in a snapshot taken after both.
  PERFORM pg_advisory_xact_lock(v.bucket_id, hashtext(v.key)),
    CASE WHEN v.existing_blob_id IS NULL AND v.locator IS NOT NULL
      THEN pg_advisory_xact_lock_shared(strata_locator_lock_key(v.backend_key, v.locator)) END;
  SELECT v.existing_blob_id IS NULL AND EXISTS (SELECT 1 FROM swept_locators s WHERE s.backend_key = v.backend_key AND s.locator = v.locator),
    coalesce(v.conditional, false) AND v.current_etag IS DISTINCT FROM (SELECT o.etag FROM object_info o
      WHERE o.bucket_id = v.bucket_id AND (o.bucket_id % 2) = (v.bucket_id % 2) AND o.key = v.key AND o.state = 'NORMAL')
  INTO v_swept, v_changed FROM buckets WHERE buckets.id = v.bucket_id FOR SHARE;
  IF NOT FOUND OR v_changed OR v_swept THEN
    RETURN QUERY SELECT 1::bigint, CASE WHEN NOT FOUND THEN 'no_bucket' WHEN v_changed THEN 'changed' ELSE 'swept' END,
      NULL::bigint, NULL::text, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;

  IF v.existing_blob_id IS NULL THEN
    INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count, created_at, data)
    VALUES (v.backend_key, v.backend, v.locator, v.blob_md5, v.blob_size, 1, v.now, decode(p_items -> 0 ->> 'data', 'base64'))
    ON CONFLICT (backend_key, md5, size) WHERE md5 IS NOT NULL AND state = 'LIVE'
    DO UPDATE SET ref_count = blobs.ref_count + 1
    RETURNING blobs.id, blobs.locator INTO v_blob_id, v_locator;
  ELSE
    UPDATE blobs SET ref_count = blobs.ref_count + 1 WHERE blobs.id = v.existing_blob_id AND blobs.state = 'LIVE'
    RETURNING blobs.id INTO v_blob_id;
    IF v_blob_id IS NULL THEN
      RETURN QUERY SELECT 1::bigint, 'blob_gone'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint;
      RETURN;
    END IF;
  END IF;
  INSERT INTO blob_owners (blob_id, owner, ref_count) VALUES (v_blob_id, v.owner, 1)
  ON CONFLICT (blob_id, owner) DO UPDATE SET ref_count = blob_owners.ref_count + 1;

  -- The replaced version releases its references: an inline blob only it referenced goes with its bytes
  -- (its owner rows cascade); another is counted down, and reported when left at zero.
  UPDATE object_info SET state = 'DELETED', deleted_at = v.now
  WHERE object_info.bucket_id = v.bucket_id AND (object_info.bucket_id % 2) = (v.bucket_id % 2) AND object_info.key = v.key
    AND object_info.state = 'NORMAL'
  RETURNING object_info.blob_id, object_info.owner, object_info.size INTO v_old_blob, v_old_owner, v_old_size;
  IF v_old_blob IS NOT NULL THEN
    DELETE FROM blobs WHERE blobs.id = v_old_blob AND blobs.ref_count = 1 AND blobs.data IS NOT NULL;
    IF NOT FOUND THEN
      UPDATE blobs SET ref_count = GREATEST(blobs.ref_count - 1, 0) WHERE blobs.id = v_old_blob RETURNING blobs.ref_count INTO v_old_refs;
      UPDATE blob_owners SET ref_count = GREATEST(blob_owners.ref_count - 1, 0)
      WHERE blob_owners.blob_id = v_old_blob AND blob_owners.owner = v_old_owner;
    END IF;
  END IF;

  INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, user_metadata, owner, last_modified,
    tags, headers, part_sizes, part_checksums)
  VALUES (v.bucket_id, v.key, 'NORMAL', v_blob_id, v.size, v.etag, v.md5, v.content_type, v.user_metadata, v.owner, v.now,
    v.tags, v.headers, v.part_sizes, v.part_checksums);
  INSERT INTO outbox (event_id, type, payload, created_at)
  VALUES (v.event_id, 'object.created', v.payload || jsonb_build_object('replacedSize', v_old_size), v.now);

  RETURN QUERY SELECT 1::bigint, 'ok'::text, v_blob_id, CASE WHEN v.existing_blob_id IS NULL THEN v_locator END, v_old_size,
    CASE WHEN v_old_refs = 0 THEN v_old_blob END;
END;
$$;
