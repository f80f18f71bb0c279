import { S3Error, type ChecksumAlgorithm, type SseRequest, type StoredHeaders, type Tag } from '../../../object-model/src/index.js';
import type { ObjectMeta } from '../catalog/catalog.js';
import type { Cache } from '../cache/cache.js';

/** An upload expires this long after it was initiated (its cache keys vanish; its part files are swept). */
export const UPLOAD_TTL_S = 7 * 24 * 3600;
/** How long a completed upload's result is kept, for a retried CompleteMultipartUpload to get it again. */
export const COMPLETED_UPLOAD_TTL_S = 3600;
/** In-progress multipart uploads one account may have at once, by default (see MultipartLimits). */
export const DEFAULT_UPLOADS_PER_ACCOUNT = 1000;

export interface UploadInfo {
  /** The id of the bucket the upload was started in: a later bucket of the same name never sees it. */
  bucketId: number;
  bucket: string;
  key: string;
  owner: string;
  /** Initiated anonymously (its owner is the bucket owner's): listed as such, completed only into this bucket. */
  anonymous?: boolean;
  contentType: string;
  userMetadata: Record<string, string>;
  /** x-amz-tagging of the initiation: the completed object's tags. */
  tags?: Tag[];
  /** Standard headers of the initiation (Cache-Control, ...): the completed object's. */
  headers?: StoredHeaders;
  /** x-amz-checksum-algorithm and -type of the initiation: every part carries one, the object gets one. */
  checksum?: UploadChecksum;
  initiated: string;
  backendKey: string;
  /** The account whose in-progress uploads this one counts against (the bucket's owner). */
  account: string;
}

/** What CreateMultipartUpload asks (MultipartService.initiate). */
export interface InitiateOptions {
  owner?: string;
  anonymous?: boolean;
  contentType?: string;
  userMetadata?: Record<string, string>;
  tags?: Tag[];
  headers?: StoredHeaders;
  checksum?: UploadChecksum;
  /** Its encryption (else the bucket's default): one data key for the upload, each part its own segment. */
  sse?: SseRequest;
}

export interface UploadChecksum {
  algorithm: ChecksumAlgorithm;
  type: 'COMPOSITE' | 'FULL_OBJECT';
}

export interface PartInfo {
  partNumber: number;
  etag: string;
  size: number;
  locator: string;
  lastModified: string;
  /** Base64 of the part's checksum by the upload's algorithm (when the upload has one). */
  checksum?: string;
}

/** What a committed CompleteMultipartUpload answered, kept for its retries. */
export interface CompletedUpload {
  bucketId: number;
  key: string;
  meta: ObjectMeta;
}

/** Keys of one upload share the hash tag {uploadId}: one Redis Cluster shard holds the upload. */
const uploadKey = (uploadId: string) => `strata:mpu:{${uploadId}}`;
const completedKey = (uploadId: string) => `strata:mpu-done:{${uploadId}}`;
const bucketUploadsKey = (bucketId: number) => `strata:mpu-bucket-id:{${bucketId}}`;
const accountUploadsKey = (account: string) => `strata:mpu-account:{${account}}`;
const partField = (n: number) => `part:${String(n).padStart(5, '0')}`;
export const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * How long a set member may go without its upload's record before it counts as left by a failed
 * create: a create writes its record within a few cache calls (each bounded by the cache's timeout).
 */
const RECORD_GRACE_MS = 60_000;

/** When a UUID v7 upload id was made (its first 48 bits are milliseconds since the epoch). */
const initiatedMs = (uploadId: string) => parseInt(uploadId.slice(0, 8) + uploadId.slice(9, 13), 16);

/**
 * Multipart upload state in the cache: each upload's info and parts (one hash), the uploads of each
 * bucket id and of each account (sets, pruned as their members expire), and the results of completed
 * uploads (kept COMPLETED_UPLOAD_TTL_S).
 */
export class UploadState {
  constructor(
    private readonly cache: Cache,
    private readonly clock: () => Date,
  ) {}

  /**
   * Record a new upload, unless its account already has `maxPerAccount` uploads in progress (S3
   * SlowDown: clients back off and retry; uploads completed or aborted meanwhile make room). The cap
   * is checked before the write, so concurrent initiations may pass it by a few.
   *
   * All or nothing as clients see it: the account's and the bucket's sets get the id first (a member
   * without a record is no upload: listings and the cap skip it, and drop it once it is older than
   * RECORD_GRACE_MS), then the record is written with its TTL in one transaction. A create that fails
   * takes back what it wrote (best-effort; its id was never answered, so nobody can use the upload);
   * whatever that misses is invisible and goes with the TTL.
   */
  async create(uploadId: string, info: UploadInfo, maxPerAccount: number): Promise<void> {
    const account = accountUploadsKey(info.account);
    if ((await this.cache.scard(account)) >= maxPerAccount && (await this.pruneOver(account)) >= maxPerAccount) {
      throw new S3Error('SlowDown', `This account has ${maxPerAccount} multipart uploads in progress, its limit: complete or abort some first.`);
    }
    const sets = [account, bucketUploadsKey(info.bucketId)];
    try {
      // Every member is younger than the upload TTL or over: a set need not outlive its newest.
      for (const set of sets) await this.cache.sadd(set, uploadId, UPLOAD_TTL_S);
      await this.cache.hset(uploadKey(uploadId), 'info', JSON.stringify(info), UPLOAD_TTL_S);
    } catch (err) {
      await Promise.all([this.cache.del(uploadKey(uploadId)), ...sets.map((set) => this.cache.srem(set, uploadId))]).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Drops the members of an account's set whose upload is over (expired, or without a record past
   * RECORD_GRACE_MS); answers how many remain.
   */
  private async pruneOver(account: string): Promise<number> {
    const members = await this.cache.smembers(account);
    const over = await Promise.all(
      members.map(async (uploadId) => initiatedMs(uploadId) < this.clock().getTime() - UPLOAD_TTL_S * 1000 || (await this.orphan(uploadId))),
    );
    for (const [i, uploadId] of members.entries()) if (over[i]) await this.cache.srem(account, uploadId);
    return over.filter((o) => !o).length;
  }

  /** A set member whose upload has no record, and is old enough that no create of it is still under way. */
  private async orphan(uploadId: string): Promise<boolean> {
    return initiatedMs(uploadId) < this.clock().getTime() - RECORD_GRACE_MS && !(await this.cache.hget(uploadKey(uploadId), 'info'));
  }

  async info(uploadId: string): Promise<UploadInfo | undefined> {
    const raw = UPLOAD_ID.test(uploadId) ? await this.cache.hget(uploadKey(uploadId), 'info') : undefined;
    return raw ? (JSON.parse(raw) as UploadInfo) : undefined;
  }

  async parts(uploadId: string): Promise<PartInfo[]> {
    const all = await this.cache.hgetall(uploadKey(uploadId));
    return Object.entries(all)
      .filter(([field]) => field.startsWith('part:'))
      .map(([, v]) => JSON.parse(v) as PartInfo)
      .sort((a, b) => a.partNumber - b.partNumber);
  }

  async part(uploadId: string, partNumber: number): Promise<PartInfo | undefined> {
    const raw = await this.cache.hget(uploadKey(uploadId), partField(partNumber));
    return raw ? (JSON.parse(raw) as PartInfo) : undefined;
  }

  /** Record a part; answers false (and leaves nothing) when the upload ended while the part streamed. */
  async savePart(uploadId: string, part: PartInfo): Promise<boolean> {
    const key = uploadKey(uploadId);
    await this.cache.hset(key, partField(part.partNumber), JSON.stringify(part));
    if (await this.cache.hget(key, 'info')) return true;
    await this.cache.del(key);
    return false;
  }

  /**
   * Forget an upload; answers whether it was still there, and the parts recorded just before it went
   * (their bytes are the caller's: parts saved while a Complete composed are among them; one saved later
   * is refused by savePart, which leaves only a save within this call's two cache round trips to the
   * part sweep). Once its hash is gone the upload is over: a set member left behind by a failed removal
   * is dropped later (a bucket's by the next listing, an account's when it is older than the upload TTL).
   */
  async forget(uploadId: string, info: UploadInfo): Promise<{ ended: boolean; parts: PartInfo[] }> {
    const parts = await this.parts(uploadId);
    const removed = await this.cache.del(uploadKey(uploadId));
    await Promise.all([this.cache.srem(bucketUploadsKey(info.bucketId), uploadId), this.cache.srem(accountUploadsKey(info.account), uploadId)]).catch(
      () => undefined,
    );
    return { ended: removed > 0, parts };
  }

  /** A bucket's uploads still in progress (ids of uploads that are over are dropped from its set). */
  async uploadsOf(bucketId: number): Promise<Array<{ uploadId: string; info: UploadInfo }>> {
    const uploads: Array<{ uploadId: string; info: UploadInfo }> = [];
    for (const uploadId of await this.cache.smembers(bucketUploadsKey(bucketId))) {
      const info = await this.info(uploadId);
      if (info) uploads.push({ uploadId, info });
      // Without a record: over, or (younger than RECORD_GRACE_MS) a create still under way.
      else if (await this.orphan(uploadId)) await this.cache.srem(bucketUploadsKey(bucketId), uploadId);
    }
    return uploads;
  }

  async recordCompleted(uploadId: string, result: CompletedUpload): Promise<void> {
    await this.cache.set(completedKey(uploadId), JSON.stringify(result), COMPLETED_UPLOAD_TTL_S);
  }

  async completed(uploadId: string): Promise<CompletedUpload | undefined> {
    const raw = UPLOAD_ID.test(uploadId) ? await this.cache.get(completedKey(uploadId)) : undefined;
    return raw ? (JSON.parse(raw) as CompletedUpload) : undefined;
  }
}
