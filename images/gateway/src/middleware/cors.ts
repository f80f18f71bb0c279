import cors from 'cors';
import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import { findCorsRule, isValidBucketName, S3Error, type BucketInfo, type CorsRule } from '../../../object-model/src/index.js';
import { RESERVED_BUCKET_NAMES } from './bucket-access.js';
import { sendStatus } from '../s3/render.js';

/** Where the middleware finds a bucket's own CORS rules (the gateway's short-lived bucket cache). */
export interface BucketLookup {
  lookup(name: string): Promise<BucketInfo>;
}

/**
 * Cross-origin access for browser applications: a page on another origin may call the gateway with
 * fetch (log in, upload to a presigned URL, read an object and its ETag). Preflights (OPTIONS) are
 * answered here, before authentication, as S3 and MinIO do; they grant nothing by themselves, since
 * every request still carries its own token or signature.
 *
 * A bucket with CORS rules of its own (PutBucketCors) is answered by them, as S3 does: the first rule
 * that allows the origin, the method and (preflight) the requested headers; none → a preflight is
 * `403 AccessForbidden` and other requests get no CORS headers. Every other request follows the
 * server-wide origins (STRATA_CORS_ORIGINS; `*` by default, as MinIO's; none: no CORS answers).
 */
export function crossOrigin(origins: readonly string[], buckets?: BucketLookup): (req: http.IncomingMessage, res: http.ServerResponse, next: Next) => void {
  const serverWide =
    origins.length === 0
      ? undefined
      : cors({
          origin: origins.includes('*') ? '*' : [...origins],
          methods: ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'],
          // No cookies are involved (auth travels in headers and URLs), so every answer header may be read:
          // ETag, x-amz-request-id, x-amz-checksum-*, x-amz-meta-*...
          exposedHeaders: '*',
          maxAge: 3600,
          optionsSuccessStatus: 200,
        });
  return (req, res, next) => {
    // As S3: no CORS headers for requests without an Origin (command-line clients, SDKs outside browsers),
    // and a preflight without one is a bad request (whatever the server-wide policy: it names no origin to check).
    const origin = req.headers.origin;
    if (origin === undefined) {
      if (req.method === 'OPTIONS') return next(new S3Error('BadRequest', 'Insufficient information. Origin request header needed.'));
      return next();
    }
    bucketRules(req.url ?? '/', buckets).then((rules) => {
      if (rules) answerByBucketRules(rules, origin, req, res, next);
      else if (serverWide) serverWide(req, res, next);
      else next();
    }, next);
  };
}

/** The CORS rules of the bucket a request names (path style), if it has any. */
async function bucketRules(url: string, buckets: BucketLookup | undefined): Promise<CorsRule[] | undefined> {
  if (!buckets) return undefined;
  // Bucket names never need decoding: any escape makes the name invalid, and it is not looked up.
  const name = url.split(/[/?]/, 2)[1] ?? '';
  if (!isValidBucketName(name) || RESERVED_BUCKET_NAMES.has(name)) return undefined;
  try {
    return (await buckets.lookup(name)).cors;
  } catch {
    return undefined; // no such bucket, or the control plane unreachable: the server-wide policy answers
  }
}

function answerByBucketRules(rules: readonly CorsRule[], origin: string, req: http.IncomingMessage, res: http.ServerResponse, next: Next): void {
  const preflight = req.method === 'OPTIONS';
  const method = preflight ? String(req.headers['access-control-request-method'] ?? '') : (req.method ?? '');
  const headers = preflight
    ? String(req.headers['access-control-request-headers'] ?? '')
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean)
    : [];
  res.setHeader('Vary', preflight ? 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers' : 'Origin');
  const rule = findCorsRule(rules, { origin, method, headers });
  if (!rule) {
    if (preflight) next(new S3Error('AccessForbidden'));
    else next();
    return;
  }
  res.setHeader('Access-Control-Allow-Origin', rule.allowedOrigins.includes('*') ? '*' : origin);
  if (rule.exposeHeaders.length > 0) res.setHeader('Access-Control-Expose-Headers', rule.exposeHeaders.join(', '));
  // As S3, the rule's methods and max age on every answer it allows, not only on preflights.
  res.setHeader('Access-Control-Allow-Methods', rule.allowedMethods.join(', '));
  if (rule.maxAgeSeconds !== undefined) res.setHeader('Access-Control-Max-Age', String(rule.maxAgeSeconds));
  if (!preflight) return next();
  if (headers.length > 0) res.setHeader('Access-Control-Allow-Headers', headers.join(', '));
  sendStatus(res, 200);
}
