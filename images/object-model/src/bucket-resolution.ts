/**
 * Bucket resolution (hack/adr/0007-bucket-resolution.md): the gateway resolves a bucket name once per
 * request, from its own cache, and hands the record down; the control plane reads bucket records from
 * the database uncached; the data plane uses the record it is handed. So the gateway's cache is the one
 * place a record can be stale, for at most its lifetime (STRATA_BUCKET_CACHE_MS, default below).
 */
export const BUCKET_CACHE_MS = 2_000;

/**
 * Time a request keeps after its authorisation to reach the plane that serves it by name (the control
 * plane's listings, deletes, tagging); generous for a loaded machine.
 */
export const BUCKET_NAME_HOLD_MARGIN_MS = 8_000;

/**
 * How long a deleted bucket's name stays with its last owner: the gateway cache's lifetime plus the
 * margin, so no gateway still resolves the name to the old owner when another account can take it.
 */
export function bucketNameHoldMs(bucketCacheMs = BUCKET_CACHE_MS): number {
  return bucketCacheMs + BUCKET_NAME_HOLD_MARGIN_MS;
}
