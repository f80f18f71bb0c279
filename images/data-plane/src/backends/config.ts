import { type SecretBox } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import type { S3BackendSettings } from './s3-backend.js';

/** The S3-compatible backend kinds; `fs` needs no settings beyond the data dir. */
export const S3_BACKEND_KINDS = ['minio', 'cloud'] as const;
export type S3BackendKind = (typeof S3_BACKEND_KINDS)[number];
export const BACKEND_KINDS: ReadonlySet<string> = new Set(['fs', ...S3_BACKEND_KINDS]);

/** Server-side backend settings: what a bucket created with just `{kind}` uses. */
export type BackendsConfig = Partial<Record<S3BackendKind, S3BackendSettings>>;

const truthy = (v: string | undefined, fallback: boolean) => (v === undefined || v === '' ? fallback : /^(1|true|yes|on)$/i.test(v));

/**
 * Reads `STRATA_BACKEND_MINIO_*` (an object-store server; path-style addressing by default) and
 * `STRATA_BACKEND_CLOUD_*` (a cloud object store; virtual-hosted style, endpoint defaults to AWS S3
 * of the region): ENDPOINT, REGION, ACCESS_KEY, SECRET_KEY, BUCKET, PREFIX, PATH_STYLE,
 * PUBLIC_ENDPOINT, IDLE_TIMEOUT_MS (ms without a byte from the backend before a call fails, default
 * 5000). A kind is configured when its ENDPOINT (cloud: ENDPOINT or REGION) is set; incomplete
 * settings are a startup error.
 */
export function backendsConfigFromEnv(env: NodeJS.ProcessEnv = process.env): BackendsConfig {
  const config: BackendsConfig = {};
  for (const kind of S3_BACKEND_KINDS) {
    const v = (name: string) => env[`STRATA_BACKEND_${kind.toUpperCase()}_${name}`] || undefined;
    const region = v('REGION');
    const endpoint = v('ENDPOINT') ?? (kind === 'cloud' && region ? `https://s3.${region}.amazonaws.com` : undefined);
    if (!endpoint) continue;
    const idle = v('IDLE_TIMEOUT_MS');
    const idleTimeoutMs = idle === undefined ? undefined : Number(idle);
    if (idleTimeoutMs !== undefined && !(Number.isInteger(idleTimeoutMs) && idleTimeoutMs > 0)) {
      throw new Error(`STRATA_BACKEND_${kind.toUpperCase()}_IDLE_TIMEOUT_MS must be a positive whole number of ms`);
    }
    const accessKey = v('ACCESS_KEY');
    const secretKey = v('SECRET_KEY');
    if (!accessKey || !secretKey) {
      throw new Error(`STRATA_BACKEND_${kind.toUpperCase()}_ACCESS_KEY and _SECRET_KEY are required when the ${kind} backend is configured`);
    }
    config[kind] = {
      kind,
      endpoint,
      region: region ?? 'us-east-1',
      accessKey,
      secretKey,
      bucket: v('BUCKET') ?? 'strata',
      prefix: v('PREFIX'),
      pathStyle: truthy(v('PATH_STYLE'), kind === 'minio'),
      publicEndpoint: v('PUBLIC_ENDPOINT'),
      ...(idleTimeoutMs !== undefined ? { idleTimeoutMs } : {}),
    };
  }
  return config;
}

/**
 * Settings a bucket carries itself (the operator's Bucket resource sends them through the control
 * plane's internal API: endpoint, region, bucket, prefix, useSSL, accessKey, secretKey), or
 * undefined when the bucket only names its kind and the server's configuration applies.
 */
export function settingsOfBucket(config: { kind: string; [setting: string]: unknown }, secrets?: SecretBox): S3BackendSettings | undefined {
  const kind = config.kind as S3BackendKind;
  const str = (name: string) => (typeof config[name] === 'string' && config[name] !== '' ? (config[name] as string) : undefined);
  const endpoint = str('endpoint');
  if (!endpoint) return undefined;
  const accessKey = str('accessKey');
  const sealed = str('secretKeySealed');
  const secretKey = str('secretKey') ?? (sealed === undefined ? undefined : openSealed(sealed, kind, secrets));
  const bucket = str('bucket');
  if (!accessKey || !secretKey || !bucket)
    throw new S3Error('InvalidArgument', `the ${kind} backend settings need accessKey, secretKey and bucket along with endpoint`);
  const useSSL = config.useSSL !== false;
  return {
    kind,
    endpoint: endpoint.includes('://') ? endpoint : `${useSSL ? 'https' : 'http'}://${endpoint}`,
    region: str('region') ?? 'us-east-1',
    accessKey,
    secretKey,
    bucket,
    prefix: str('prefix'),
    pathStyle: typeof config.pathStyle === 'boolean' ? config.pathStyle : kind === 'minio',
  };
}

/** The control plane stores a bucket's own backend secret key sealed with the server key (STRATA_SECRET_KEY). */
function openSealed(sealed: string, kind: string, secrets: SecretBox | undefined): string {
  if (!secrets) throw new S3Error('ServiceUnavailable', `the ${kind} backend's secret key is sealed and this data plane has no STRATA_SECRET_KEY`);
  try {
    return secrets.open(sealed);
  } catch {
    throw new S3Error('ServiceUnavailable', `the ${kind} backend's secret key does not open with this data plane's STRATA_SECRET_KEY`);
  }
}
