-- Group commit for embedded PGlite: the commits of several concurrent PUTs in ONE statement and one
-- transaction (images/data-plane/src/catalog/group-commit.ts). PGlite runs one statement at a time on
-- the Node.js thread, so concurrent commits queue anyway; a batch pays the per-statement and
-- per-transaction cost (protocol, parse, WAL flush) once instead of once per object.
-- p_items: a JSON array of strata_commit_object's arguments by name; the rows come back with r_index,
-- the item's 1-based position. Items are applied in order, each seeing the ones before it.
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
      (v_item->>'now')::timestamptz, v_item->>'eventId', v_item->'payload') AS c;
  END LOOP;
END;
$$;
