/**
 * Whether an If-Match / If-None-Match value — a comma-separated list of ETags, quoted or weak (`W/`),
 * or `*` — names this ETag (unquoted). Every service that evaluates a condition uses this one.
 */
export function etagMatches(header: string, etag: string): boolean {
  return header.split(',').some((t) => {
    const v = t.trim().replace(/^W\//, '').replace(/^"|"$/g, '');
    return v === '*' || v === etag;
  });
}
