import { cachedLookup, type Peeked } from '../../../service-kit/src/index.js';
import { isValidBucketName, S3Error, type BucketInfo, type ObjectLayer, type Permission } from '../../../object-model/src/index.js';
import type { Caller } from '../context.js';
import { bucketAllows } from './access-policy.js';

/**
 * Tenant isolation: a caller may only touch buckets they own. Bucket records are cached for a moment
 * (they change rarely) so hot object paths do not pay a control-plane round trip each; this process
 * forgets a bucket at once when it deletes it.
 */
export class BucketAccess {
  private readonly cache: ReturnType<typeof cachedLookup<BucketInfo>>;

  constructor(
    objects: Pick<ObjectLayer, 'getBucket'>,
    ttlMs: number,
    /** Told whether each lookup was answered from memory (metrics). */
    onLookup?: (hit: boolean) => void,
    /** The platform's public access block (STRATA_BLOCK_PUBLIC_ACLS): public ACLs refused and ignored everywhere. */
    readonly platformBlocksPublic = false,
  ) {
    this.cache = cachedLookup((name) => objects.getBucket(name), ttlMs, { onLookup });
  }

  lookup(name: string): Promise<BucketInfo> {
    return this.cache(name);
  }

  /** The bucket, if the caller owns it; NoSuchBucket / AccessDenied otherwise. */
  async owned(name: string, caller: Caller): Promise<BucketInfo> {
    const bucket = await this.existing(name);
    if (bucket.owner !== caller.username) throw new S3Error('AccessDenied', 'Access Denied: the bucket belongs to another account.');
    return bucket;
  }

  /**
   * The bucket, if the caller (undefined: anonymous) owns it or its ACL grants `permission` (READ: list
   * it; WRITE: write and delete its objects; READ_ACP / WRITE_ACP: its ACL); AccessDenied otherwise.
   */
  async permitted(name: string, caller: Caller | undefined, permission: Permission): Promise<BucketInfo> {
    const bucket = await this.existing(name);
    if (!bucketAllows(bucket, caller?.username, permission, this.platformBlocksPublic)) throw new S3Error('AccessDenied');
    return bucket;
  }

  /** The bucket's record; NoSuchBucket when there is none. */
  async existing(name: string): Promise<BucketInfo> {
    if (!isValidBucketName(name)) throw new S3Error('NoSuchBucket', undefined, { BucketName: name });
    try {
      return await this.lookup(name);
    } catch (err) {
      if (err instanceof S3Error && err.code === 'NoSuchBucket') throw new S3Error('NoSuchBucket', undefined, { BucketName: name });
      throw err;
    }
  }

  /** The bucket's record when this process holds it fresh (counted as a lookup answered from memory); else undefined: ask `existing`. */
  existingNow(name: string): BucketInfo | undefined {
    return isValidBucketName(name) ? this.cache.known(name) : undefined;
  }

  /** The record a request resolved moments ago, if this process still holds it fresh (its value once it has one): no lookup, not counted. */
  recent(name: string): Peeked<BucketInfo> | undefined {
    return this.cache.peek(name);
  }

  forget(name: string): void {
    this.cache.forget(name);
  }
}

/** Names that would shadow the gateway's own routes. */
export const RESERVED_BUCKET_NAMES = new Set(['admin', 'login', 'healthz', 'readyz', 'metrics']);
