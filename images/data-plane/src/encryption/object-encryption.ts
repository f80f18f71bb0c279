import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { pipeline, Readable } from 'node:stream';
import { S3Error, type EncryptionRule, type SseRequest } from '../../../object-model/src/index.js';
import type { ByteRange, StorageBackend } from '../backends/storage-backend.js';
import { PlainWindow, SegmentDecryptor, segmentRange, segmentSize, SegmentEncryptor, NONCE_PREFIX_BYTES } from './chunked-aead.js';
import { ThreadedSegmentDecryptor } from './decrypt-thread.js';
import { FileSegmentDecryptor } from './file-segment-decryptor.js';
import { ThreadedSegmentEncryptor } from './encrypt-thread.js';
import { Md5Tap, type ThreadMd5 } from '../backends/md5-thread.js';
import { unwrapKey, wrapKey, type KeyStore } from './key-store.js';

/**
 * Reads and writes of at least this many plaintext bytes (writes of unknown size too) are enciphered on
 * the encryption threads (crypto-pool.ts); smaller ones in place, sparing the round trip.
 */
const THREADED = 1024 * 1024;

/**
 * An object's encryption record, kept (JSON) in its stored headers under ENCRYPTION_ENTRY: how its data
 * key is wrapped, never a key in the clear. SSE-S3: wrapped by the key-encryption key `kek` (its
 * fingerprint). SSE-KMS: by the key store's key `kms`. SSE-C: by the customer's key, which is not kept;
 * `hmac` (HMAC-SHA256 of the key under the random `salt`, as MinIO keeps) tells a wrong key from a
 * tampered record, and `keyMd5` is what S3 echoes.
 */
export interface EncryptionRecord {
  alg: 'AES256' | 'aws:kms' | 'SSE-C';
  kek?: string;
  kms?: string;
  key: string;
  keyMd5?: string;
  salt?: string;
  hmac?: string;
}

/** A new object's encryption: its record and its data key (the key only in memory, for this write). */
export interface Sealed {
  record: EncryptionRecord;
  dataKey: Buffer;
}

const SSE_C_CONTEXT = 'sse-c';

function customerHmac(customerKey: Buffer, salt: Buffer): Buffer {
  return createHmac('sha256', customerKey).update('strata-sse-c').update(salt).digest();
}

/** A customer key as the gateway checked it (base64 of 32 bytes). */
function customerKeyOf(value: string): Buffer {
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new S3Error('InvalidArgument', 'The secret key was invalid for the specified algorithm.');
  return key;
}

/** Reads and writes objects' bytes encrypted (SSE-S3, SSE-KMS, SSE-C), in chunks (chunked-aead.ts). */
export class ObjectEncryption {
  constructor(private readonly keys: { master?: KeyStore; kms?: KeyStore }) {}

  /**
   * The encryption of a new object: what the request asks, else the bucket's default (S3 applies it to
   * every write without encryption headers); undefined: stored in the clear.
   */
  async seal(sse: SseRequest | undefined, bucketDefault: EncryptionRule[] | undefined): Promise<Sealed | undefined> {
    if (!sse?.customerKey && !sse?.method && !bucketDefault?.length) return undefined;
    const dataKey = randomBytes(32);
    if (sse?.customerKey) {
      const customerKey = customerKeyOf(sse.customerKey);
      const salt = randomBytes(16);
      return {
        dataKey,
        record: {
          alg: 'SSE-C',
          key: wrapKey(customerKey, dataKey, SSE_C_CONTEXT),
          keyMd5: createHash('md5').update(customerKey).digest('base64'),
          salt: salt.toString('base64'),
          hmac: customerHmac(customerKey, salt).toString('base64'),
        },
      };
    }
    const rule = sse?.method ? { algorithm: sse.method, kmsKeyId: sse.kmsKeyId } : bucketDefault?.[0];
    if (!rule) return undefined;
    if (rule.algorithm === 'aws:kms') {
      if (!this.keys.kms) throw new S3Error('KMS.NotFoundException', 'No KMS key is configured on this server (STRATA_SSE_KMS_KEYS).');
      const { keyId, wrapped } = await this.keys.kms.wrap(dataKey, rule.kmsKeyId);
      return { dataKey, record: { alg: 'aws:kms', kms: keyId, key: wrapped } };
    }
    if (!this.keys.master) throw new S3Error('NotImplemented', 'Server-side encryption is not configured on this server (STRATA_SSE_MASTER_KEY).');
    const { keyId, wrapped } = await this.keys.master.wrap(dataKey);
    return { dataKey, record: { alg: 'AES256', kek: keyId, key: wrapped } };
  }

  /**
   * The data key of an object with `record` (undefined: not encrypted, answers undefined) for a request
   * that brings `customerKey`. As S3: an SSE-C object read without its key, or a customer key for an
   * object not encrypted with one, is InvalidRequest (400); a wrong key is AccessDenied (403).
   */
  async open(raw: string | undefined, customerKey: string | undefined): Promise<Buffer | undefined> {
    const record = raw === undefined ? undefined : (JSON.parse(raw) as EncryptionRecord);
    if (record?.alg !== 'SSE-C') {
      if (customerKey !== undefined) throw new S3Error('InvalidRequest', 'The encryption parameters are not applicable to this object.');
      if (!record) return undefined;
      const store = record.alg === 'aws:kms' ? this.keys.kms : this.keys.master;
      const keyId = record.alg === 'aws:kms' ? record.kms : record.kek;
      if (!store || !keyId) throw new S3Error('InternalError', `the object is encrypted with a key this server does not have (${keyId})`);
      return store.unwrap(record.key, keyId);
    }
    if (customerKey === undefined)
      throw new S3Error(
        'InvalidRequest',
        'The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.',
      );
    const key = customerKeyOf(customerKey);
    const expected = Buffer.from(record.hmac ?? '', 'base64');
    const actual = customerHmac(key, Buffer.from(record.salt ?? '', 'base64'));
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual))
      throw new S3Error('AccessDenied', 'The provided customer key is not the one the object was encrypted with.');
    const dataKey = unwrapKey(key, record.key, SSE_C_CONTEXT);
    if (!dataKey) throw new S3Error('InternalError', "the object's wrapped data key failed authentication");
    return dataKey;
  }

  /** Whether `raw` (a stored record) and `sse` (a write's request) mean the same key, so a copy may share the bytes. */
  static sameKey(raw: string | undefined, sealed: Sealed | undefined, sourceKey: Buffer | undefined, targetCustomerKey: string | undefined): boolean {
    if (raw === undefined || sealed === undefined) return raw === undefined && sealed === undefined;
    const record = JSON.parse(raw) as EncryptionRecord;
    if (record.alg !== sealed.record.alg) return false;
    if (record.alg === 'aws:kms') return record.kms === sealed.record.kms;
    if (record.alg === 'SSE-C') return sourceKey !== undefined && targetCustomerKey !== undefined && record.keyMd5 === sealed.record.keyMd5;
    return true;
  }

  /** The record a copy that shares the source's bytes keeps: the source's own (the same data key). */
  static recordOf(raw: string): EncryptionRecord {
    return JSON.parse(raw) as EncryptionRecord;
  }

  /**
   * `body` encrypted as one segment under `dataKey`. `check` runs once the whole plaintext has passed and
   * before the last chunk is sealed (the size and MD5 checks of the plaintext): its error fails the stream.
   * `plainSize`: the size the body declared, when it did; `md5`: given every plaintext byte, in order;
   * `tenant`: whose write this is (the encryption threads are shared fairly among tenants).
   */
  static encrypting(
    body: Readable,
    dataKey: Buffer,
    check: () => void | Promise<void>,
    opts: { plainSize?: number; md5?: ThreadMd5; tenant?: string } = {},
  ): Readable {
    const { plainSize, md5 } = opts;
    if (plainSize === undefined || plainSize >= THREADED) {
      // The threads read the batches the encryptor gathers, and so does the MD5 thread: one copy in all.
      const encryptor = new ThreadedSegmentEncryptor(dataKey, check, plainSize, opts.tenant, md5);
      pipeline(body, encryptor, () => undefined);
      return encryptor;
    }
    const encryptor = new SegmentEncryptor(dataKey, check, plainSize);
    if (md5) pipeline(body, new Md5Tap(md5), encryptor, () => undefined);
    else pipeline(body, encryptor, () => undefined);
    return encryptor;
  }

  /**
   * The ETag of an SSE-C or SSE-KMS object (S3: not the MD5 of its data): the HMAC-MD5 of its plaintext's
   * MD5 under its data key. 32 hex digits like an MD5, of no use without the key, and new with every
   * write (each has its own data key), as the MD5 of the stored bytes was, without hashing them.
   */
  static opaqueEtag(dataKey: Buffer, plainMd5: string): string {
    return createHmac('md5', dataKey).update(plainMd5).digest('hex');
  }

  /** Stored bytes of a segment of `plain` bytes (what the backend checks the encrypted body against). */
  static storedSize(plain: number): number {
    return segmentSize(plain);
  }

  /**
   * Plaintext bytes `range` (all when undefined) of an encrypted blob of `segments` (plaintext sizes: the
   * parts of a multipart object, or its one body), reading and decrypting only the chunks they cover.
   */
  static async decrypting(
    backend: StorageBackend,
    locator: string,
    segments: number[],
    dataKey: Buffer,
    range: ByteRange | undefined,
    /** Whose read this is (the object's owner): the encryption threads are shared fairly among tenants. */
    tenant = '',
  ): Promise<Readable> {
    const total = segments.reduce((a, b) => a + b, 0);
    const start = range?.start ?? 0;
    const end = range?.end ?? total - 1;
    // One segment (a PutObject's body): its decryptor is the answer, one stream hop less per chunk.
    if (segments.length === 1 && total > 0) return decryptSegment(backend, locator, 0, total, start, end, dataKey, tenant);
    async function* plain(): AsyncGenerator<Buffer> {
      let plainAt = 0;
      let storedAt = 0;
      for (const n of segments) {
        const last = plainAt + n - 1;
        if (n > 0 && last >= start && plainAt <= end) {
          const from = Math.max(start, plainAt) - plainAt;
          const decrypted = await decryptSegment(backend, locator, storedAt, n, from, Math.min(end, last) - plainAt, dataKey, tenant);
          try {
            yield* decrypted;
          } finally {
            decrypted.destroy();
          }
        }
        plainAt += n;
        storedAt += segmentSize(n);
        if (plainAt > end) break;
      }
    }
    return Readable.from(plain(), { objectMode: false });
  }
}

/**
 * Plaintext bytes [from, to] of the segment of `plain` bytes stored at `storedAt` in the blob, decrypted
 * from the chunks they cover. A failed read fails the answer; a reader gone closes the backend's stream.
 */
async function decryptSegment(
  backend: StorageBackend,
  locator: string,
  storedAt: number,
  plain: number,
  from: number,
  to: number,
  dataKey: Buffer,
  tenant: string,
): Promise<Readable> {
  const r = segmentRange(plain, from, to);
  const length = to - from + 1;
  // Large reads of a file: the encryption threads read and decipher it themselves (no stored byte on the event loop).
  const file = length >= THREADED ? await backend.openFile?.(locator) : undefined;
  const read = { key: dataKey, window: new PlainWindow(plain, r.first, r.skip, length), tenant };
  if (file) {
    try {
      return new FileSegmentDecryptor(file, storedAt, read);
    } catch (err) {
      await file.close().catch(() => undefined);
      throw err;
    }
  }
  // From the segment's start the prefix comes with the chunks (one read); else it is read apart.
  let prefix: Buffer | undefined;
  let chunks: Readable;
  if (r.first === 0) {
    chunks = await backend.get(locator, { start: storedAt, end: storedAt + r.to });
  } else {
    prefix = await readAll(await backend.get(locator, { start: storedAt, end: storedAt + NONCE_PREFIX_BYTES - 1 }));
    chunks = await backend.get(locator, { start: storedAt + r.from, end: storedAt + r.to });
  }
  // Large reads of a stream (a remote store) are deciphered on the encryption threads (the other core); small
  // ones here, sparing the round trip.
  const decryptor = length >= THREADED ? new ThreadedSegmentDecryptor(prefix, read) : new SegmentDecryptor(dataKey, prefix, plain, r.first, r.skip, length);
  chunks.on('error', (err) => decryptor.destroy(err));
  decryptor.on('close', () => chunks.destroy());
  return chunks.pipe(decryptor);
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}
