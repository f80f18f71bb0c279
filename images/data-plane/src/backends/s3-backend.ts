import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { Readable, pipeline } from 'node:stream';
import { Client, S3Error as MinioS3Error } from 'minio';
import { S3Error, STANDARD_OBJECT_HEADERS, type StoredHeaders } from '../../../object-model/src/index.js';
import { BackendBreaker } from './backend-breaker.js';
import { HashingCounter, meteredBody } from './metered-body.js';
import { BlobMissingError, type ByteRange, type HashedBlob, type PutOptions, type StorageBackend, type StoredBlob } from './storage-backend.js';

/** Where an S3-compatible backend keeps Strata's blobs: one bucket (and optional key prefix) on one endpoint. */
export interface S3BackendSettings {
  /** `minio` (an object-store server) or `cloud` (a cloud object store): only the defaults differ. */
  kind: 'minio' | 'cloud';
  /** Base URL of the S3 API, e.g. `http://minio:9000` or `https://s3.eu-west-1.amazonaws.com`. */
  endpoint: string;
  region: string;
  accessKey: string;
  secretKey: string;
  /** The backend bucket holding the blobs (created on first use when missing). */
  bucket: string;
  /** Key prefix inside that bucket, e.g. `strata/` (letters, digits, `._-/` only). */
  prefix?: string;
  /** Path-style addressing (`endpoint/bucket/key`); false = virtual-hosted (`bucket.endpoint/key`), as AWS prefers. */
  pathStyle: boolean;
  /** Base URL clients reach the backend at, for presigned redirects, when it differs from `endpoint`. */
  publicEndpoint?: string;
  /** Bytes per uploaded chunk: the most one upload holds in memory. Default 8 MiB (at least 5 MiB). */
  partSize?: number;
  /**
   * A backend connection silent this long is dropped (503). Default 5 s: below the gateway's
   * data-plane timeout, so that a backend that hangs is reported as the backend's failure.
   */
  idleTimeoutMs?: number;
}

const LOCATOR = /^p?[0-9a-f]{32}$/;
const PREFIX = /^[A-Za-z0-9._\-/]*$/;
const DEFAULT_PART_SIZE = 8 * 1024 * 1024;
const DEFAULT_IDLE_TIMEOUT_MS = 5_000;
const MIN_PART_SIZE = 5 * 1024 * 1024;
/** Part copies run this many at a time when a multipart object is composed. */
const COMPOSE_CONCURRENCY = 4;
/** Node network errors that mean "the backend cannot be reached right now". */
const NETWORK_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'ECONNABORTED']);
const RETRYABLE_S3_CODES = new Set(['ServiceUnavailable', 'SlowDown', 'InternalError', 'RequestTimeout']);
const NOT_FOUND_CODES = new Set(['NoSuchKey', 'NotFound']);
/** The backend says its storage or a quota is full (MinIO, Ceph RGW, S3-compatible servers): 507, not a fault of the data plane. */
const FULL_S3_CODES = new Set(['XMinioStorageFull', 'InsufficientStorage', 'QuotaExceeded', 'XMinioAdminBucketQuotaExceeded']);
/** The backend refuses Strata itself (credentials, its bucket gone): unusable until an admin fixes it. */
const REFUSED_S3_CODES = new Set(['AccessDenied', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'NoSuchBucket', 'AllAccessDisabled']);

/**
 * A keep-alive agent whose sockets are destroyed (ETIMEDOUT) after `idleMs` without traffic: minio-js
 * sets no timeouts, and a backend that accepts connections but never answers must fail requests
 * (503) rather than hang them. The agent's own `timeout` is that too: a connection going back to the
 * pool gets the agent's timeout (Node's keepSocketAlive), which would otherwise be none, leaving every
 * call on a reused connection unbounded.
 */
function agentWithIdleTimeout(useSSL: boolean, idleMs: number): http.Agent {
  const options = { keepAlive: true, timeout: idleMs };
  const agent = useSSL ? new https.Agent(options) : new http.Agent(options);
  const connect = agent.createConnection.bind(agent);
  agent.createConnection = (options, callback) => {
    const socket = connect(options, callback) as net.Socket;
    socket.setTimeout(idleMs, () => socket.destroy(Object.assign(new Error(`no traffic from the backend for ${idleMs} ms`), { code: 'ETIMEDOUT' })));
    return socket;
  };
  return agent;
}

function clientFor(endpoint: string, s: S3BackendSettings): Client {
  const url = new URL(endpoint);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`backend endpoint must be an http(s) URL: ${endpoint}`);
  const useSSL = url.protocol === 'https:';
  return new Client({
    endPoint: url.hostname,
    port: url.port ? Number(url.port) : undefined,
    useSSL,
    accessKey: s.accessKey,
    secretKey: s.secretKey,
    // A fixed region: minio-js then never asks the server for the bucket's location.
    region: s.region,
    pathStyle: s.pathStyle,
    transportAgent: agentWithIdleTimeout(useSSL, s.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS),
    // No silent retries (minio-js would log them with console.warn): a 503 reaches the S3 client, which retries.
    retryOptions: { disableRetry: true },
  });
}

/**
 * Blobs as objects in one bucket of an S3-compatible server through the `minio` client: any
 * S3-compatible server (MinIO, Ceph radosgw, ...) or a cloud object store. Bodies are streamed in
 * `partSize` chunks (hashed on the way) and published only once size and MD5 are verified, so a
 * failed upload leaves nothing. Multipart objects are composed on the backend (UploadPartCopy);
 * GET can be served by the backend itself through presigned URLs.
 */
export class S3Backend implements StorageBackend {
  readonly key: string;
  private readonly client: Client;
  private readonly presigner: Client;
  private readonly prefix: string;
  private readonly partSize: number;
  private readyCheck: Promise<void> | undefined;
  /** Every call to the backend goes through it (sweeps excepted): a failing backend fails fast. */
  private readonly breaker: BackendBreaker;
  /** False once the server refused UploadPartCopy (e.g. s3rver): parts are then concatenated by streaming. */
  private serverSideCompose = true;

  constructor(
    readonly settings: S3BackendSettings,
    private readonly onSweepError?: (err: Error) => void,
  ) {
    this.prefix = settings.prefix ?? '';
    if (!PREFIX.test(this.prefix)) throw new Error(`backend prefix ${JSON.stringify(this.prefix)} may only hold letters, digits and ._-/`);
    this.partSize = Math.max(settings.partSize ?? DEFAULT_PART_SIZE, MIN_PART_SIZE);
    this.client = clientFor(settings.endpoint, settings);
    this.presigner = settings.publicEndpoint ? clientFor(settings.publicEndpoint, settings) : this.client;
    this.key = S3Backend.keyOf(settings);
    this.breaker = new BackendBreaker(this.key, settings.kind);
  }

  /** Identity of the storage (never secrets): blobs dedupe and are freed within one key. */
  static keyOf(settings: S3BackendSettings): string {
    return `${settings.kind}:${new URL(settings.endpoint).host}/${settings.bucket}/${settings.prefix ?? ''}`;
  }

  private objectName(locator: string): string {
    if (!LOCATOR.test(locator)) throw new Error(`invalid blob locator ${JSON.stringify(locator)}`);
    return locator.startsWith('p') ? `${this.prefix}parts/${locator}` : `${this.prefix}blobs/${locator}`;
  }

  /** Maps client and server failures to S3 errors: an unreachable or overloaded backend is 503 ServiceUnavailable. */
  private failure(err: unknown, action: string): Error {
    if (err instanceof S3Error) return err;
    const code = (err as { code?: string } | null)?.code ?? '';
    const message = (err as Error | null)?.message ?? String(err);
    // minio-js checks names and settings itself (InvalidBucketNameError, InvalidArgumentError, ...): bad settings.
    const name = (err as Error | null)?.name ?? '';
    if (!(err instanceof MinioS3Error) && /^Invalid\w*Error$/.test(name)) {
      return new S3Error('InvalidArgument', `The ${this.settings.kind} storage backend settings are not valid: ${message}`);
    }
    if (FULL_S3_CODES.has(code)) {
      return new S3Error('InsufficientStorage', `The storage backend ${this.key} is full (${action}): ${code}: ${message}`, {
        StorageBackend: this.settings.kind,
      });
    }
    // minio-js turns 429/5xx answers into a code-less "Request failed ...: Retryable HTTP status: 503".
    // A backend that asks to slow down (SlowDown, 503, 429: momentarily too busy, as S3 answers a burst
    // on one prefix) is relayed as SlowDown, which clients retry with backoff; other failures to reach
    // it are ServiceUnavailable. Marked StorageBackend either way (see below).
    if (code === 'SlowDown' || /Retryable HTTP status: (429|503)\b/.test(message)) {
      return new S3Error('SlowDown', `The storage backend ${this.key} is busy (${action}): ${code || message}; please retry later.`, {
        StorageBackend: this.settings.kind,
      });
    }
    const overloaded = /Retryable HTTP status: (429|5\d\d)/.test(message);
    if (NETWORK_ERRORS.has(code) || RETRYABLE_S3_CODES.has(code) || REFUSED_S3_CODES.has(code) || code.startsWith('UND_ERR') || overloaded) {
      // StorageBackend in the extras tells the gateway's breaker that the data plane itself is healthy.
      return new S3Error('ServiceUnavailable', `The storage backend ${this.key} is unavailable (${action}): ${code || message}`, {
        StorageBackend: this.settings.kind,
      });
    }
    // Plain Error (not ECONNRESET-coded): the data plane answers InternalError and logs it.
    return new Error(`storage backend ${this.key} failed to ${action}: ${code ? `${code}: ` : ''}${message}`, { cause: err });
  }

  /**
   * The backend answers and its bucket exists (created when missing). Checked once, before the first
   * write, and when a bucket is created on this backend; a failed check is retried next time.
   */
  ready(): Promise<void> {
    this.readyCheck ??= this.breaker.run(async () => {
      try {
        if (!(await this.client.bucketExists(this.settings.bucket))) {
          await this.client.makeBucket(this.settings.bucket, this.settings.region).catch(async (err: unknown) => {
            // Another data plane made it meanwhile.
            if (!(await this.client.bucketExists(this.settings.bucket))) throw err;
          });
        }
      } catch (err) {
        this.readyCheck = undefined;
        throw this.failure(err, `reach bucket ${this.settings.bucket}`);
      }
    });
    // (A check the open breaker refused is retried next time too.)
    this.readyCheck.catch(() => {
      this.readyCheck = undefined;
    });
    return this.readyCheck;
  }

  async put(body: Readable, opts: PutOptions = {}): Promise<HashedBlob> {
    // The body's error handling before any await (see meteredBody).
    const { source, counter, verify } = meteredBody(body, opts);
    const hashed = pipeline(source, counter, () => undefined);
    try {
      await this.ready();
    } catch (err) {
      hashed.destroy();
      throw err;
    }
    return this.upload(opts.part ? 'p' : '', hashed, counter, verify);
  }

  /**
   * Streams `chunks` to a new object: one PUT when it fits in a part, else a multipart upload whose
   * parts go out as they fill. `verify` runs before the object is published (PUT or complete).
   */
  private async upload(locatorPrefix: string, chunks: Readable, counter: HashingCounter, verify: (size: number, md5: string) => void): Promise<HashedBlob> {
    const locator = locatorPrefix + randomBytes(16).toString('hex');
    const name = this.objectName(locator);
    const { bucket } = this.settings;
    let uploadId: string | undefined;
    const etags: Array<{ part: number; etag: string }> = [];
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const sendPart = () =>
      this.call('upload a part', async () => {
        const payload = Buffer.concat(pending, pendingBytes);
        pending = [];
        pendingBytes = 0;
        uploadId ??= await this.client.initiateNewMultipartUpload(bucket, name, {});
        const part = etags.length + 1;
        const md5 = createHash('md5').update(payload).digest('base64');
        const res = await this.client.uploadPart(
          { bucketName: bucket, objectName: name, uploadID: uploadId, partNumber: part, headers: { 'Content-Length': payload.length, 'Content-MD5': md5 } },
          payload,
        );
        etags.push({ part, etag: res.etag });
      });
    try {
      // Errors of the body (too large, client gone) surface here as they are.
      for await (const chunk of chunks) {
        pending.push(chunk as Buffer);
        pendingBytes += (chunk as Buffer).length;
        if (pendingBytes >= this.partSize) await sendPart();
      }
      const md5 = counter.digestHex();
      verify(counter.size, md5);
      if (uploadId === undefined) {
        await this.call('store a blob', () => this.client.putObject(bucket, name, Buffer.concat(pending, pendingBytes), pendingBytes));
      } else {
        if (pendingBytes > 0) await sendPart();
        await this.call('complete a blob', () => this.client.completeMultipartUpload(bucket, name, uploadId!, etags));
      }
      return { locator, size: counter.size, md5 };
    } catch (err) {
      chunks.destroy();
      if (uploadId !== undefined) await this.client.abortMultipartUpload(bucket, name, uploadId).catch(() => undefined);
      throw err;
    }
  }

  /** Runs one backend call, its failures mapped by `failure`. */
  private call<T>(action: string, fn: () => Promise<T>): Promise<T> {
    return this.breaker.run(async () => {
      try {
        return await fn();
      } catch (err) {
        throw this.failure(err, action);
      }
    });
  }

  /**
   * Concatenates parts on the backend: a multipart upload of UploadPartCopy calls, so no byte passes
   * through Strata. The backend does not hash the result, so the blob's MD5 is unknown (null): such
   * blobs are not instant-upload candidates. Servers without UploadPartCopy get a streamed copy instead.
   */
  async compose(locators: string[]): Promise<StoredBlob> {
    await this.ready();
    if (this.serverSideCompose) {
      const composed = await this.breaker.run(() => this.composeOnServer(locators));
      if (composed) return composed;
      this.serverSideCompose = false;
    }
    const get = (l: string) => this.get(l);
    async function* concatenated() {
      for (const l of locators) yield* await get(l);
    }
    const counter = new HashingCounter(Number.MAX_SAFE_INTEGER, () => new S3Error('EntityTooLarge'));
    return this.upload(
      '',
      pipeline(Readable.from(concatenated()), counter, () => undefined),
      counter,
      () => undefined,
    );
  }

  /** The composed blob, or undefined when the server does not implement UploadPartCopy. */
  private async composeOnServer(locators: string[]): Promise<StoredBlob | undefined> {
    const { bucket } = this.settings;
    const locator = randomBytes(16).toString('hex');
    const name = this.objectName(locator);
    let uploadId: string | undefined;
    try {
      uploadId = await this.client.initiateNewMultipartUpload(bucket, name, {});
      const etags: Array<{ part: number; etag: string }> = new Array(locators.length);
      let next = 0;
      const worker = async () => {
        for (let i = next++; i < locators.length; i = next++) {
          const res = await this.client.uploadPart({
            bucketName: bucket,
            objectName: name,
            uploadID: uploadId!,
            partNumber: i + 1,
            headers: { 'x-amz-copy-source': `/${bucket}/${this.objectName(locators[i])}` },
          });
          etags[i] = { part: i + 1, etag: res.etag };
        }
      };
      await Promise.all(Array.from({ length: Math.min(COMPOSE_CONCURRENCY, locators.length) }, worker));
      await this.client.completeMultipartUpload(bucket, name, uploadId, etags);
      const stat = await this.client.statObject(bucket, name);
      return { locator, size: stat.size, md5: null };
    } catch (err) {
      if (uploadId !== undefined) await this.client.abortMultipartUpload(bucket, name, uploadId).catch(() => undefined);
      if ((err as { code?: string }).code === 'NotImplemented') return undefined;
      throw this.failure(err, 'compose parts');
    }
  }

  async get(locator: string, range?: ByteRange): Promise<Readable> {
    const name = this.objectName(locator);
    return this.breaker.run(async () => {
      try {
        return await (range
          ? this.client.getPartialObject(this.settings.bucket, name, range.start, range.end - range.start + 1)
          : this.client.getObject(this.settings.bucket, name));
      } catch (err) {
        // (A missing blob is no failure of the backend: its breaker does not count it.)
        if (err instanceof MinioS3Error && NOT_FOUND_CODES.has(String(err.code))) throw new BlobMissingError(this.key, locator);
        throw this.failure(err, 'read a blob');
      }
    });
  }

  async delete(locator: string): Promise<void> {
    // S3 DELETE of a missing key succeeds, as the interface wants.
    await this.call('delete a blob', () => this.client.removeObject(this.settings.bucket, this.objectName(locator)));
  }

  exists(locator: string): Promise<boolean> {
    return this.breaker.run(async () => {
      try {
        await this.client.statObject(this.settings.bucket, this.objectName(locator));
        return true;
      } catch (err) {
        if (err instanceof MinioS3Error && NOT_FOUND_CODES.has(String(err.code))) return false;
        throw this.failure(err, 'look up a blob');
      }
    });
  }

  /** A presigned GET of the backend itself (signed offline), typed as the object is. */
  async directUrl(locator: string, expiresSeconds: number, opts: { contentType?: string; headers?: StoredHeaders } = {}): Promise<string> {
    // The backend's object has none of Strata's metadata: the answer gets it as response-* overrides.
    const respHeaders: Record<string, string> = {};
    if (opts.contentType) respHeaders['response-content-type'] = opts.contentType;
    for (const name of STANDARD_OBJECT_HEADERS) {
      const value = opts.headers?.[name];
      if (value !== undefined) respHeaders[`response-${name}`] = value;
    }
    return this.presigner.presignedGetObject(this.settings.bucket, this.objectName(locator), expiresSeconds, respHeaders);
  }

  /**
   * Sweeps for the data plane's cleanup job (gc/cleanup-job.ts). They are best effort: an unreachable
   * backend is reported through `onSweepError` and counts 0, so it never stops the data plane.
   */
  private async sweep(what: string, fn: () => Promise<number>): Promise<number> {
    try {
      return await fn();
    } catch (err) {
      this.onSweepError?.(this.failure(err, what));
      return 0;
    }
  }

  /** Backend multipart uploads older than `minAgeMs` (bodies being streamed when a data plane died) are aborted. */
  removeStaleTempFiles(minAgeMs: number): Promise<number> {
    return this.sweep('abort stale uploads', async () => {
      const cutoff = Date.now() - minAgeMs;
      let aborted = 0;
      // Only Strata's own names: the backend bucket may hold other data.
      for (const dir of [`${this.prefix}blobs/`, `${this.prefix}parts/`]) {
        for await (const item of this.client.listIncompleteUploads(this.settings.bucket, dir, true)) {
          const u = item as { key?: string; uploadId?: string; initiated?: Date };
          if (u.key && u.uploadId && u.initiated && new Date(u.initiated).getTime() < cutoff) {
            await this.client.abortMultipartUpload(this.settings.bucket, u.key, u.uploadId);
            aborted++;
          }
        }
      }
      return aborted;
    });
  }

  /** Part objects older than `maxAgeMs`: their uploads expired unfinished (complete and abort remove their own). */
  removeStaleParts(maxAgeMs: number): Promise<number> {
    return this.sweep('remove stale parts', async () => {
      const cutoff = Date.now() - maxAgeMs;
      const stale: string[] = [];
      for await (const item of this.client.listObjectsV2(this.settings.bucket, `${this.prefix}parts/`, true)) {
        const o = item as { name?: string; lastModified?: Date };
        if (o.name && o.lastModified && o.lastModified.getTime() < cutoff) stale.push(o.name);
      }
      if (stale.length) await this.client.removeObjects(this.settings.bucket, stale);
      return stale.length;
    });
  }

  /** Every blob object with its modification time (the cleanup job removes those no metadata names). */
  async *listBlobs(): AsyncIterable<{ locator: string; modifiedMs: number }> {
    const dir = `${this.prefix}blobs/`;
    try {
      for await (const item of this.client.listObjectsV2(this.settings.bucket, dir, true)) {
        const o = item as { name?: string; lastModified?: Date };
        const locator = o.name?.slice(dir.length);
        if (locator && LOCATOR.test(locator) && o.lastModified) yield { locator, modifiedMs: o.lastModified.getTime() };
      }
    } catch (err) {
      this.onSweepError?.(this.failure(err, 'list blobs'));
    }
  }
}
