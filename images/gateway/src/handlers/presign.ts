import { S3Error } from '../../../object-model/src/index.js';
import { MAX_PRESIGN_SECONDS, presignUrl } from '../auth/sigv4.js';
import { callerOf, state } from '../context.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { sendData } from '../s3/render.js';
import { pathStyleHost } from '../s3/virtual-host.js';

/**
 * Where clients reach this gateway with path-style URLs: STRATA_PUBLIC_URL, else the request's own scheme
 * and Host (the domain's own host for a virtual-hosted request, whose Host names the bucket).
 */
export function originOf({ req, deps }: S3Request): string {
  if (deps.publicUrl) return deps.publicUrl.replace(/\/$/, '');
  return `${deps.proxies.protocol(req)}://${pathStyleHost(req)}`;
}

/** GET /{bucket}/{key}?presign&method=GET|PUT&expires=SECONDS → {"data":{"url","expiresAt"}} */
export const presign: S3Handler = async (s3) => {
  const { res, bucket, key, query, deps } = s3;
  state(res).errorFormat = 'json';
  const caller = callerOf(res);
  await deps.buckets.owned(bucket, caller);
  const method = (query.get('method') ?? 'GET').toUpperCase();
  if (method !== 'GET' && method !== 'PUT') throw new S3Error('InvalidArgument', 'method must be GET or PUT', { ArgumentName: 'method' });
  const rawExpires = query.get('expires') ?? '3600';
  if (!/^\d+$/.test(rawExpires) || Number(rawExpires) < 1 || Number(rawExpires) > MAX_PRESIGN_SECONDS) {
    throw new S3Error('InvalidArgument', `expires must be a whole number of seconds between 1 and ${MAX_PRESIGN_SECONDS}`, { ArgumentName: 'expires' });
  }
  const expiresSeconds = Number(rawExpires);
  const cred = await deps.credentials(caller.accessKey);
  const now = new Date();
  const url = presignUrl({
    method,
    origin: originOf(s3),
    path: `/${bucket}/${key}`,
    accessKey: cred.accessKey,
    secret: cred.secretKey,
    region: deps.region,
    expiresSeconds,
    now,
  });
  sendData(res, { url, method, expiresAt: new Date(now.getTime() + expiresSeconds * 1000).toISOString() });
};
