-- An item's inline bytes (strata_commit_objects, strata_commit_one): `dataAt`, the offset of its
-- `dataSize` bytes in the call's p_data (the data plane sends every item's bytes there, as one binary
-- parameter: no base64 to encode, parse and decode), else `data` in base64; NULL when it has neither.
CREATE FUNCTION strata_item_data(p_item jsonb, p_data bytea)
RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_item ? 'dataAt' THEN substring(p_data FROM (p_item ->> 'dataAt')::int + 1 FOR (p_item ->> 'dataSize')::int)
    ELSE decode(p_item ->> 'data', 'base64') END
$$;
