-- The items of a strata_commit_objects batch as rows (idx = the item's 1-based position). An item names
-- its key, its owner and its blob: `existingBlobId` (an instant upload or a copy), or the new content's
-- `backendKey`, `backend`, `locator`, `blobMd5` (NULL when the backend could not hash it) and `blobSize`,
-- with `data` (base64) for an inline blob, read only where a blob row is written. Then the version's
-- fields, `now`, and its event (`eventId`, `payload`). A `conditional` item commits only while its key's
-- current version is the one its caller checked the preconditions against: ETag `currentEtag`, or none
-- where that is NULL. (The row type is migrations/0010_commit_item_type.sql.)
CREATE FUNCTION strata_commit_items(p_items jsonb)
RETURNS SETOF strata_commit_item
LANGUAGE sql STABLE AS $$
  SELECT i.idx, i."bucketId", i.key, i.owner, i."existingBlobId", i."backendKey", i.backend, i.locator, i."blobMd5",
    i."blobSize", i.size, i.etag, i.md5, i."contentType", i."userMetadata", i.now, i."eventId", i.payload, i.tags, i.headers,
    i."partSizes", i."partChecksums", i.conditional, i."currentEtag"
  FROM ROWS FROM (jsonb_to_recordset(p_items) AS ("bucketId" integer, key text, owner text, "existingBlobId" bigint,
    "backendKey" text, backend jsonb, locator text, "blobMd5" text, "blobSize" bigint, size bigint, etag text, md5 text,
    "contentType" text, "userMetadata" jsonb, now timestamptz, "eventId" text, payload jsonb, tags jsonb, headers jsonb,
    "partSizes" bigint[], "partChecksums" text[], conditional boolean, "currentEtag" text)) WITH ORDINALITY
    AS i("bucketId", key, owner, "existingBlobId", "backendKey", backend, locator, "blobMd5", "blobSize", size, etag, md5,
      "contentType", "userMetadata", now, "eventId", payload, tags, headers, "partSizes", "partChecksums", conditional,
      "currentEtag", idx)
$$;
