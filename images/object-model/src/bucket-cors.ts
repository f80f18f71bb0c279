/**
 * A bucket's CORS configuration as the services keep and exchange it (JSON): the gateway maps S3's
 * `CORSConfiguration` XML to it and back, keeps it with the bucket record and answers browsers by it.
 */
export interface CorsRule {
  id?: string;
  /** Origins, each with at most one `*` wildcard (`*` alone: any). */
  allowedOrigins: string[];
  /** Of CORS_METHODS. */
  allowedMethods: string[];
  /** Request headers a preflight may ask for, each with at most one `*`; compared case-insensitively. */
  allowedHeaders: string[];
  /** Answer headers the page may read. */
  exposeHeaders: string[];
  maxAgeSeconds?: number;
}

export const MAX_CORS_RULES = 100;
export const CORS_METHODS = ['GET', 'PUT', 'HEAD', 'POST', 'DELETE'] as const;

/** S3's CORS patterns: literal text with at most one `*`, which matches any run of characters. */
export function corsPatternMatches(pattern: string, value: string, ignoreCase = false): boolean {
  const p = ignoreCase ? pattern.toLowerCase() : pattern;
  const v = ignoreCase ? value.toLowerCase() : value;
  const star = p.indexOf('*');
  if (star < 0) return p === v;
  const head = p.slice(0, star);
  const tail = p.slice(star + 1);
  return v.length >= head.length + tail.length && v.startsWith(head) && v.endsWith(tail);
}

/**
 * The first rule that allows a browser request (S3 evaluates the rules in order): its origin, its
 * method (a preflight's Access-Control-Request-Method), and every header a preflight asks for.
 */
export function findCorsRule(rules: readonly CorsRule[], request: { origin: string; method: string; headers?: readonly string[] }): CorsRule | undefined {
  return rules.find(
    (rule) =>
      rule.allowedOrigins.some((o) => corsPatternMatches(o, request.origin)) &&
      rule.allowedMethods.includes(request.method) &&
      (request.headers ?? []).every((h) => rule.allowedHeaders.some((a) => corsPatternMatches(a, h, true))),
  );
}
