import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { S3Error } from '../../../object-model/src/index.js';

/**
 * Where data keys are wrapped: the seam for a key-management service. The built-in store below keeps
 * its keys in memory, from the environment; an external KMS (Vault transit, AWS KMS, ...) implements the
 * same two calls over its API (wrap = its Encrypt/GenerateDataKey, unwrap = its Decrypt) and is passed
 * to the data plane instead. A store never sees plaintext object bytes, only 32-byte data keys.
 */
export interface KeyStore {
  /** Wrap `dataKey` under key `keyId` (the store's default when undefined); KMS.NotFoundException for an unknown key. */
  wrap(dataKey: Buffer, keyId?: string): Promise<{ keyId: string; wrapped: string }>;
  /** The data key `wrapped` holds; fails when `keyId` is unknown or the wrapped key was altered. */
  unwrap(wrapped: string, keyId: string): Promise<Buffer>;
}

const IV = 12;
const TAG = 16;

/** AES-256-GCM key wrap: base64 of iv | wrapped key | tag, bound to the key id and `purpose` as additional data. */
export function wrapKey(kek: Buffer, dataKey: Buffer, context: string): string {
  const iv = randomBytes(IV);
  const cipher = createCipheriv('aes-256-gcm', kek, iv);
  cipher.setAAD(Buffer.from(context));
  const body = Buffer.concat([cipher.update(dataKey), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64');
}

/** The key wrapKey wrapped; undefined when `kek` or `context` is not the one it was wrapped with. */
export function unwrapKey(kek: Buffer, wrapped: string, context: string): Buffer | undefined {
  const raw = Buffer.from(wrapped, 'base64');
  if (raw.length < IV + TAG) return undefined;
  const decipher = createDecipheriv('aes-256-gcm', kek, raw.subarray(0, IV));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(raw.subarray(raw.length - TAG));
  try {
    return Buffer.concat([decipher.update(raw.subarray(IV, raw.length - TAG)), decipher.final()]);
  } catch {
    return undefined;
  }
}

/** A 256-bit key from base64; `what` names it in the error. */
export function keyFromBase64(value: string, what: string): Buffer {
  const key = Buffer.from(value.trim(), 'base64');
  if (key.length !== 32) throw new Error(`${what} must be 32 bytes in base64 (openssl rand -base64 32)`);
  return key;
}

/** A key's id when it has no name: the first 16 hex digits of its SHA-256 (names it without revealing it). */
export function keyFingerprint(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/** Named 256-bit keys in memory, one of them the default for new wraps (the others still unwrap). */
export class BuiltInKeyStore implements KeyStore {
  constructor(
    private readonly keys: ReadonlyMap<string, Buffer>,
    readonly defaultKeyId: string | undefined,
    /** Binds wraps to this store's use (`sse-s3`, `sse-kms`), so a key of one never opens the other's wraps. */
    private readonly purpose: string,
  ) {
    if (defaultKeyId !== undefined && !keys.has(defaultKeyId)) throw new Error(`the default key ${defaultKeyId} is not among the keys`);
  }

  private key(keyId: string | undefined): { id: string; key: Buffer } {
    const id = keyId ?? this.defaultKeyId;
    const key = id === undefined ? undefined : this.keys.get(id);
    if (id === undefined || !key) throw new S3Error('KMS.NotFoundException', `Invalid keyId ${keyId ?? '(default)'}`);
    return { id, key };
  }

  async wrap(dataKey: Buffer, keyId?: string): Promise<{ keyId: string; wrapped: string }> {
    const { id, key } = this.key(keyId);
    return { keyId: id, wrapped: wrapKey(key, dataKey, `${this.purpose}:${id}`) };
  }

  async unwrap(wrapped: string, keyId: string): Promise<Buffer> {
    const key = this.keys.get(keyId);
    const dataKey = key && unwrapKey(key, wrapped, `${this.purpose}:${keyId}`);
    if (!dataKey) throw new S3Error('InternalError', `the object's data key cannot be opened with key ${keyId} (is it still configured?)`);
    return dataKey;
  }
}

/** The data plane's key settings (config.ts: STRATA_SSE_MASTER_KEY, STRATA_SSE_MASTER_KEYS, STRATA_SSE_KMS_KEYS, STRATA_SSE_KMS_DEFAULT_KEY). */
export interface EncryptionKeySettings {
  /** The current key-encryption key of SSE-S3 (base64, 32 bytes): new objects' data keys are wrapped with it. */
  masterKey?: string;
  /** Former ones (comma-separated base64): objects written under them still read, without being rewritten. */
  masterKeys?: string;
  /** SSE-KMS keys of the built-in store: `name:base64,...`. */
  kmsKeys?: string;
  /** The KMS key of `aws:kms` without a key id; default the first of kmsKeys. */
  kmsDefaultKey?: string;
}

/** The SSE-S3 store (keys by fingerprint, the current one the default) and the SSE-KMS store, from settings. */
export function keyStoresFrom(settings: EncryptionKeySettings): { master?: BuiltInKeyStore; kms?: BuiltInKeyStore } {
  const master = new Map<string, Buffer>();
  for (const old of (settings.masterKeys ?? '').split(',').filter((v) => v.trim() !== '')) {
    const key = keyFromBase64(old, 'each of STRATA_SSE_MASTER_KEYS');
    master.set(keyFingerprint(key), key);
  }
  let current: string | undefined;
  if (settings.masterKey) {
    const key = keyFromBase64(settings.masterKey, 'STRATA_SSE_MASTER_KEY');
    current = keyFingerprint(key);
    master.set(current, key);
  }
  const kms = new Map<string, Buffer>();
  for (const entry of (settings.kmsKeys ?? '').split(',').filter((v) => v.trim() !== '')) {
    const colon = entry.indexOf(':');
    if (colon <= 0) throw new Error('STRATA_SSE_KMS_KEYS must be name:base64key,...');
    kms.set(entry.slice(0, colon).trim(), keyFromBase64(entry.slice(colon + 1), `KMS key ${entry.slice(0, colon)}`));
  }
  const kmsDefault = settings.kmsDefaultKey || [...kms.keys()][0];
  return {
    ...(current ? { master: new BuiltInKeyStore(master, current, 'sse-s3') } : master.size ? { master: new BuiltInKeyStore(master, undefined, 'sse-s3') } : {}),
    ...(kms.size ? { kms: new BuiltInKeyStore(kms, kmsDefault, 'sse-kms') } : {}),
  };
}
