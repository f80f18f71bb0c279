const QUOTES = /^"|"$/g;

/**
 * An ETag as the object model keeps it (bare hex, `-N` for a multipart one) from its forms on the
 * wire: quoted (`"…"`), weak (`W/"…"`), with space around it. Every service unquotes ETags here.
 */
export function unquoteEtag(etag: string): string {
  return etag.trim().replace(QUOTES, '').replace(/^W\//, '').replace(QUOTES, '');
}

/**
 * Whether an If-Match / If-None-Match value — a comma-separated list of ETags, quoted or weak (`W/`),
 * or `*` — names this ETag (unquoted). Every service that evaluates a condition uses this one.
 */
export function etagMatches(header: string, etag: string): boolean {
  return header.split(',').some((t) => {
    const v = unquoteEtag(t);
    return v === '*' || v === etag;
  });
}
