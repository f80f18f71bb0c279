import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
  type CompletedPart,
  type CompleteMultipartUploadCommandOutput,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { fixtureHooks } from '../../support/fixture-hooks.js';
import { presignUrl, type PresignInput } from '../../../images/gateway/src/auth/sigv4.js';
import { ROOT_PASSWORD, ROOT_USER, startTestPlatform, type TestPlatform } from './platform.js';

/** The AWS SDK v3 as S3 clients use it against Strata: path style, us-east-1, SigV4. */
export function sdkClient(endpoint: string, accessKeyId = ROOT_USER, secretAccessKey = ROOT_PASSWORD): S3Client {
  return new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId, secretAccessKey }, maxAttempts: 1 });
}

export async function login(endpoint: string, username = ROOT_USER, password = ROOT_PASSWORD): Promise<string> {
  const r = await fetch(`${endpoint}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password }) });
  if (r.status !== 200) throw new Error(`login failed: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { data: { token: string } }).data.token;
}

/** A user made by the root (POST /admin/users): its password, its keys and an SDK client signing with them (the caller destroys it). */
export interface Tenant {
  readonly password: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly s3: S3Client;
}

export async function createTenant(endpoint: string, username: string, password = `${username}-password-1`): Promise<Tenant> {
  const res = await fetch(`${endpoint}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await login(endpoint)}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  if (res.status !== 201) throw new Error(`creating ${username} failed: ${res.status} ${await res.text()}`);
  const creds = ((await res.json()) as { data: { accessKey: string; secretKey: string } }).data;
  return { password, ...creds, s3: sdkClient(endpoint, creds.accessKey, creds.secretKey) };
}

/** A new user, made by the root, and an SDK client signing as that user (the caller destroys it). */
export async function tenantClient(endpoint: string, username: string): Promise<S3Client> {
  return (await createTenant(endpoint, username)).s3;
}

/** A URL the root user presigns for `method` on `path` of the platform at `endpoint` (us-east-1, valid a minute unless `opts` says otherwise). */
export function rootPresign(endpoint: string, method: string, path: string, opts: Partial<Omit<PresignInput, 'method' | 'origin' | 'path'>> = {}): string {
  return presignUrl({ method, origin: endpoint, path, accessKey: ROOT_USER, secret: ROOT_PASSWORD, region: 'us-east-1', expiresSeconds: 60, ...opts });
}

/** `fetch` of a URL the root user presigns, over the headers the request carries (and `query`, besides the signature's own). */
export function presignedFetch(
  endpoint: string,
  method: string,
  path: string,
  init: { headers?: Record<string, string>; body?: BodyInit; query?: Array<[string, string]> } = {},
): Promise<Response> {
  const url = rootPresign(endpoint, method, path, { headers: init.headers, extraQuery: init.query });
  return fetch(url, { method, headers: init.headers, body: init.body });
}

/** The Authorization header of a request made with a bearer `token`. */
export function bearer(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}

/** Code and message of an S3 XML error document. */
export function s3ErrorOf(xml: string): { code: string; message: string } {
  return { code: /<Code>([^<]*)<\/Code>/.exec(xml)?.[1] ?? '', message: /<Message>([^<]*)<\/Message>/.exec(xml)?.[1] ?? '' };
}

export async function fileSha256(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file)) h.update(c as Buffer);
  return h.digest('hex');
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export function md5Hex(data: Buffer | string): string {
  return createHash('md5').update(data).digest('hex');
}

/** Unique bucket names so suites never collide. */
export function bucketName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
}

/** Makes a bucket named from `prefix` (as bucketName) with the credentials of `s3`; answers its name. */
export async function newBucket(s3: S3Client, prefix: string): Promise<string> {
  const name = bucketName(prefix);
  await s3.send(new CreateBucketCommand({ Bucket: name }));
  return name;
}

/** A multipart upload of `bodies` as parts 1, 2, … of `key`, completed: answers CompleteMultipartUpload's answer. */
export async function uploadInParts(s3: S3Client, bucket: string, key: string, bodies: Array<Buffer | string>): Promise<CompleteMultipartUploadCommandOutput> {
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
  const parts = [];
  for (const [i, Body] of bodies.entries()) parts.push(await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body })));
  return s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: completedParts(parts) } }));
}

/** The S3 error name and HTTP status of a call that must fail (throws when it succeeds). */
export async function s3Failure(p: Promise<unknown>): Promise<{ name: string; status: number }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof S3ServiceException) return { name: err.name, status: err.$metadata.httpStatusCode ?? 0 };
    throw err;
  }
  throw new Error('expected the S3 call to fail');
}

/** Asserts that `bucket` holds no object `key` (HEAD answers 404). */
export async function expectAbsent(s3: S3Client, bucket: string, key: string): Promise<void> {
  expect((await s3Failure(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })))).status, key).to.equal(404);
}

/** The Parts of a CompleteMultipartUpload: each upload answer's ETag under its number, from 1 in the order given. */
export function completedParts(answers: Array<{ ETag?: string } | undefined>): CompletedPart[] {
  return answers.map((a, i) => ({ PartNumber: i + 1, ETag: a?.ETag }));
}

/** The whole body of a GetObject answer. */
export async function bodyBytes(r: { Body?: unknown }): Promise<Buffer> {
  return Buffer.from(await (r.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
}

/** The whole body of a GetObject answer, as text. */
export async function bodyText(r: { Body?: unknown }): Promise<string> {
  return (await bodyBytes(r)).toString();
}

/** A suite's platform, its SDK client, one bucket and the root's bearer token, made ready by the hooks sdkPlatform registers. */
export interface SdkPlatform {
  readonly p: TestPlatform;
  readonly s3: S3Client;
  readonly bucket: string;
  readonly token: string;
}

/**
 * A suite (`describe`) with a platform of its own, its root SDK client and one bucket named from
 * `prefix`: `body` declares the tests, and `env` is filled in by the time they run.
 */
export function describeWithBucket(title: string, prefix: string, body: (env: SdkPlatform, bucket: string) => void, timeoutMs = 120_000): void {
  describe(title, function () {
    this.timeout(timeoutMs);
    const env = sdkPlatform(prefix);
    body(env, env.bucket);
  });
}

/** Registers hooks that make a tenant (as createTenant) before the suite's tests and log it in (`token`); its client is destroyed after them. */
export function tenantHooks(env: SdkPlatform, username: string): Tenant & { readonly token: string } {
  return fixtureHooks(
    'suite',
    async () => {
      const tenant = await createTenant(env.p.endpoint, username);
      return { ...tenant, token: await login(env.p.endpoint, username, tenant.password) };
    },
    (tenant) => tenant.s3.destroy(),
  );
}

/** Registers before/after hooks that start a platform with one bucket (named from prefix) and tear it down. */
function sdkPlatform(prefix: string): SdkPlatform {
  const env = { bucket: bucketName(prefix) } as { -readonly [K in keyof SdkPlatform]: SdkPlatform[K] };
  before(async () => {
    env.p = await startTestPlatform();
    env.s3 = sdkClient(env.p.endpoint);
    env.token = await login(env.p.endpoint);
    await env.s3.send(new CreateBucketCommand({ Bucket: env.bucket }));
  });
  after(async () => {
    env.s3?.destroy();
    await env.p?.destroy();
  });
  return env;
}
