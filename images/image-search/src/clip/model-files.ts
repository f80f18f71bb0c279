// Where the CLIP model lives: a local directory, or objects in Strata's object store (any S3 API)
// copied once into a local cache directory. Nothing is ever downloaded from a model hub.
import { createHash, createHmac } from 'node:crypto';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { streamToFileAtomic } from '../atomic-file.js';
import { fetchFromStore } from '../store-fetch.js';

export const MODEL_FILES = {
  image: 'image_encoder.onnx',
  text: 'text_encoder.onnx',
  merges: 'merges.txt',
  vocab: 'vocab.json',
} as const;
const REQUIRED = [MODEL_FILES.image, MODEL_FILES.text, MODEL_FILES.merges];

export class ModelMissingError extends Error {}

/** The first line of the test model's merges.txt (`npm run make-test-clip`); CLIP's own starts "#version: 0.2". */
export const TEST_MODEL_MARK = '#version: strata-test-clip';

/** What a model directory holds, as the status tells it: CLIP ViT-B/32, or the test encoder (which is not CLIP). */
export function describeModel(dir: string): { backbone: string; testEncoder: boolean; note?: string } {
  let firstLine = '';
  try {
    firstLine = readFileSync(path.join(dir, MODEL_FILES.merges), 'utf8').split('\n', 1)[0].trim();
  } catch {
    // unreadable: described as what it claims to be
  }
  if (firstLine === TEST_MODEL_MARK) {
    return {
      backbone: 'strata-test-clip',
      testEncoder: true,
      note: 'test encoder, not CLIP: it matches colours and textures only (images/image-search/README.md, "Model": the ViT-B/32 export)',
    };
  }
  return { backbone: 'ViT-B/32', testEncoder: false };
}

/** Throws ModelMissingError naming what is missing, or returns the directory. */
export function checkModelDir(dir: string | undefined): string {
  if (!dir)
    throw new ModelMissingError(
      'CLIP model missing: set IMAGE_SEARCH_MODEL_DIR (or IMAGE_SEARCH_MODEL_S3_URL) to a directory made by `npm run make-test-clip -- <dir>` or hack/clip/export-clip.py',
    );
  const missing = REQUIRED.filter((f) => !existsSync(path.join(dir, f)));
  if (missing.length) throw new ModelMissingError(`CLIP model missing in ${dir}: no ${missing.join(', ')}`);
  return dir;
}

export interface S3Location {
  /** Endpoint of the S3 API, e.g. http://127.0.0.1:9000 (path-style addressing). */
  endpoint: string;
  /** s3://bucket/prefix of the model files. */
  url: string;
  region?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

/** Copy the model files from the object store into `cacheDir` (skipping ones already there). */
export async function fetchModelFromS3(location: S3Location, cacheDir: string): Promise<string> {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(location.url);
  if (!match) throw new ModelMissingError(`IMAGE_SEARCH_MODEL_S3_URL must look like s3://bucket/prefix, got ${location.url}`);
  const [, bucket, rawPrefix] = match;
  const prefix = rawPrefix && !rawPrefix.endsWith('/') ? `${rawPrefix}/` : rawPrefix;
  await fs.mkdir(cacheDir, { recursive: true });
  for (const name of Object.values(MODEL_FILES)) {
    const target = path.join(cacheDir, name);
    if (existsSync(target)) continue;
    const url = new URL(`${location.endpoint.replace(/\/$/, '')}/${bucket}/${(prefix + name).split('/').map(encodeURIComponent).join('/')}`);
    const response = await fetchFromStore(url, signedHeaders(url, location));
    if (response.status === 404 && name === MODEL_FILES.vocab) continue;
    if (!response.ok || !response.body) {
      throw new ModelMissingError(`CLIP model missing: GET ${url.pathname} from the object store answered ${response.status}`);
    }
    await streamToFileAtomic(Readable.fromWeb(response.body as WebReadableStream), target);
  }
  return checkModelDir(cacheDir);
}

const sha256 = (data: string) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** RFC 3986 encoding as SigV4 wants it (encodeURIComponent leaves !'()* alone). */
const rfc3986 = (v: string) => encodeURIComponent(v).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The canonical query string of SigV4: encoded pairs sorted by key, then value. */
function canonicalQuery(url: URL): string {
  return [...url.searchParams]
    .map(([k, v]) => [rfc3986(k), rfc3986(v)])
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

/** AWS Signature V4 headers for an unsigned-body GET (query included); none without credentials. */
export function signedHeaders(url: URL, location: Pick<S3Location, 'region' | 'accessKeyId' | 'secretAccessKey'>, now = new Date()): Record<string, string> {
  if (!location.accessKeyId || !location.secretAccessKey) return {};
  const region = location.region ?? 'us-east-1';
  const amzDate = now.toISOString().replace(/[:-]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const payload = sha256('');
  const canonicalHeaders = `host:${url.host}\nx-amz-content-sha256:${payload}\nx-amz-date:${amzDate}\n`;
  const signed = 'host;x-amz-content-sha256;x-amz-date';
  const canonicalRequest = ['GET', url.pathname, canonicalQuery(url), canonicalHeaders, signed, payload].join('\n');
  const scope = `${day}/${region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${location.secretAccessKey}`, day), region), 's3'), 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign).digest('hex');
  return {
    'x-amz-date': amzDate,
    'x-amz-content-sha256': payload,
    authorization: `AWS4-HMAC-SHA256 Credential=${location.accessKeyId}/${scope}, SignedHeaders=${signed}, Signature=${signature}`,
  };
}
