-- Inline blobs: the bytes of small bodies on the filesystem backend live in their blob's row (as MinIO
-- keeps small objects inside their metadata file), written by the object's own commit: no file, fsync,
-- rename or unlink per small PUT (images/data-plane/src/backends/fs-backend.ts, InlineBlobs). NULL for
-- blobs whose bytes are on a backend. MAIN: compressed when that helps, kept in the row when it fits.
ALTER TABLE blobs ADD COLUMN IF NOT EXISTS data bytea;
ALTER TABLE blobs ALTER COLUMN data SET STORAGE MAIN;

-- The commit functions of migrations 0003 and 0004 with the inline bytes (p_data; 'data', base64, in a
-- batch item). The old signature goes: a data plane that does not know p_data falls back to its
-- multi-statement transaction (it never writes inline blobs).
DROP FUNCTION IF EXISTS strata_commit_object(integer, text, text, bigint, text, jsonb, text, text, bigint, bigint, text, text, text, jsonb, timestamptz, text, jsonb);

CREATE OR REPLACE FUNCTION strata_commit_object(
  p_bucket_id integer, p_key text, p_owner text,
  p_existing_blob_id bigint,
  p_backend_key text, p_backend jsonb, p_locator text, p_blob_md5 text, p_blob_size bigint,
  p_size bigint, p_etag text, p_md5 text, p_content_type text, p_user_metadata jsonb, p_now timestamptz,
  p_event_id text, p_payload jsonb, p_data bytea)
RETURNS TABLE (r_status text, r_blob_id bigint, r_locator text, r_replaced_size bigint, r_unreferenced_blob_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_blob_id bigint;
  v_locator text;
  v_old_blob bigint;
  v_old_owner text;
  v_old_size bigint;
  v_old_refs integer;
BEGIN
  -- Writers of one key queue here before touching any blob row; the bucket row is share-locked
  -- against a concurrent bucket delete.
  PERFORM pg_advisory_xact_lock(p_bucket_id, hashtext(p_key));
  PERFORM 1 FROM buckets WHERE id = p_bucket_id FOR SHARE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'no_bucket'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;

  IF p_existing_blob_id IS NULL THEN
    INSERT INTO blobs (backend_key, backend, locator, md5, size, ref_count, created_at, data)
    VALUES (p_backend_key, p_backend, p_locator, p_blob_md5, p_blob_size, 1, p_now, p_data)
    ON CONFLICT (backend_key, md5, size) WHERE md5 IS NOT NULL AND state = 'LIVE'
    DO UPDATE SET ref_count = blobs.ref_count + 1
    RETURNING blobs.id, blobs.locator INTO v_blob_id, v_locator;
  ELSE
    UPDATE blobs SET ref_count = blobs.ref_count + 1 WHERE blobs.id = p_existing_blob_id AND blobs.state = 'LIVE'
    RETURNING blobs.id INTO v_blob_id;
    IF v_blob_id IS NULL THEN
      RETURN QUERY SELECT 'blob_gone'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint;
      RETURN;
    END IF;
  END IF;
  INSERT INTO blob_owners (blob_id, owner, ref_count) VALUES (v_blob_id, p_owner, 1)
  ON CONFLICT (blob_id, owner) DO UPDATE SET ref_count = blob_owners.ref_count + 1;

  -- The replaced version (overwritten versions do not go to the recycle bin) releases its references.
  UPDATE object_info SET state = 'DELETED', deleted_at = p_now
  WHERE bucket_id = p_bucket_id AND (bucket_id % 2) = (p_bucket_id % 2) AND key = p_key AND state = 'NORMAL'
  RETURNING object_info.blob_id, object_info.owner, object_info.size INTO v_old_blob, v_old_owner, v_old_size;
  IF v_old_blob IS NOT NULL THEN
    UPDATE blobs SET ref_count = GREATEST(blobs.ref_count - 1, 0) WHERE blobs.id = v_old_blob RETURNING blobs.ref_count INTO v_old_refs;
    UPDATE blob_owners SET ref_count = GREATEST(blob_owners.ref_count - 1, 0) WHERE blob_owners.blob_id = v_old_blob AND blob_owners.owner = v_old_owner;
  END IF;

  INSERT INTO object_info (bucket_id, key, state, blob_id, size, etag, md5, content_type, user_metadata, owner, last_modified)
  VALUES (p_bucket_id, p_key, 'NORMAL', v_blob_id, p_size, p_etag, p_md5, p_content_type, p_user_metadata, p_owner, p_now);
  INSERT INTO outbox (event_id, type, payload, created_at)
  VALUES (p_event_id, 'object.created', p_payload || jsonb_build_object('replacedSize', v_old_size), p_now);

  RETURN QUERY SELECT 'ok'::text, v_blob_id, v_locator, v_old_size, CASE WHEN v_old_refs = 0 THEN v_old_blob END;
END;
$$;

CREATE OR REPLACE FUNCTION strata_commit_objects(p_items jsonb)
RETURNS TABLE (r_index bigint, r_status text, r_blob_id bigint, r_locator text, r_replaced_size bigint, r_unreferenced_blob_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_item jsonb;
  v_index bigint;
BEGIN
  FOR v_item, v_index IN SELECT value, ordinality FROM jsonb_array_elements(p_items) WITH ORDINALITY LOOP
    RETURN QUERY SELECT v_index, c.* FROM strata_commit_object(
      (v_item->>'bucketId')::integer, v_item->>'key', v_item->>'owner',
      (v_item->>'existingBlobId')::bigint,
      v_item->>'backendKey', v_item->'backend', v_item->>'locator', v_item->>'blobMd5', (v_item->>'blobSize')::bigint,
      (v_item->>'size')::bigint, v_item->>'etag', v_item->>'md5', v_item->>'contentType', v_item->'userMetadata',
      (v_item->>'now')::timestamptz, v_item->>'eventId', v_item->'payload', decode(v_item->>'data', 'base64')) AS c;
  END LOOP;
END;
$$;
