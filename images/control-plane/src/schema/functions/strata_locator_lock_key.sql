-- The advisory lock key of a blob file (backend, locator), for the orphan sweep's fence: the sweep holds
-- it exclusively while it fences an orphan (swept_locators), and a commit or repair that makes a row name
-- the file holds it shared until its end. (One bigint: apart from the two-int keys of the commit's key locks.)
CREATE FUNCTION strata_locator_lock_key(p_backend_key text, p_locator text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT hashtextextended(p_backend_key || '/' || p_locator, 0)
$$;
