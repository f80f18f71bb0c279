import type { IncomingMessage } from 'node:http';

/**
 * Virtual-hosted-style requests (`http://photos.s3.example.com/cat.jpg`), as S3 clients send them by
 * default once they are given a domain endpoint, turned into the path style the rest of the gateway
 * speaks (`/photos/cat.jpg`) before anything else sees the request. Only hosts under a configured
 * domain are rewritten (STRATA_S3_DOMAINS, like MinIO's MINIO_DOMAIN); every other request, and any
 * request to the domain itself, stays path style.
 */

interface Rewritten {
  /** The request target as the client sent it, and signed it (SigV4's canonical URI). */
  target: string;
  /** The configured domain's host (with the request's port): where path-style URLs for this client go. */
  baseHost: string;
}

const rewritten = new WeakMap<IncomingMessage, Rewritten>();

/** The function that rewrites a request addressed to `<bucket>.<domain>` (a no-op without domains). */
export function virtualHostedStyle(domains: readonly string[]): (req: IncomingMessage) => void {
  const suffixes = domains.map((d) => `.${d.toLowerCase().replace(/\.$/, '')}`);
  if (suffixes.length === 0) return () => undefined;
  // The last Host found to name no bucket: a client's requests all send the same.
  let pathStyleOnly: string | undefined;
  return (req) => {
    const host = req.headers.host;
    if (!host || host === pathStyleOnly) return;
    const { name, port } = splitHost(host.toLowerCase());
    const suffix = suffixes.find((s) => name.length > s.length && name.endsWith(s));
    if (!suffix) {
      pathStyleOnly = host;
      return;
    }
    const target = req.url ?? '/';
    const bucket = name.slice(0, -suffix.length);
    rewritten.set(req, { target, baseHost: `${suffix.slice(1)}${port}` });
    req.url = `/${bucket}${target.startsWith('/') ? target : `/${target}`}`;
  };
}

/** `host[:port]` → name and `:port` (empty without one); a bracketed IPv6 literal never matches a domain. */
function splitHost(host: string): { name: string; port: string } {
  const m = /^([^:[\]]+)(:\d+)?$/.exec(host);
  return m ? { name: m[1]!, port: m[2] ?? '' } : { name: '', port: '' };
}

/** The request target as the client sent and signed it (before any virtual-host rewrite). */
export function sentTarget(req: IncomingMessage & { originalUrl?: string }): string {
  return rewritten.get(req)?.target ?? req.originalUrl ?? req.url ?? '/';
}

/** The host path-style URLs for this client should name: the configured domain for a virtual-hosted request, else its own Host. */
export function pathStyleHost(req: IncomingMessage): string | undefined {
  return rewritten.get(req)?.baseHost ?? req.headers.host;
}
