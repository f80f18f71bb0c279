import type { BucketConfigs, CorsRule, KeyScope, LifecycleRule, ListBucketsQuery, ObjectMeta, Tag } from '../../../object-model/src/index.js';

export type { BucketConfigs } from '../../../object-model/src/index.js';

/** Where a bucket's bytes live. `kind` picks the data plane's storage backend; the rest is its settings. */
export interface BackendConfig {
  kind: 'fs' | 'minio' | 'cloud';
  [setting: string]: unknown;
}

export interface Bucket {
  id: number;
  name: string;
  owner: string;
  backend: BackendConfig;
  createdAt: string;
  /** Its lifecycle rules, when it has any. */
  lifecycle?: LifecycleRule[];
  /** Its CORS rules, when it has any. */
  cors?: CorsRule[];
  /** Its object ownership controls, access grants and public access block, when it has them (object-model access-control.ts). */
  ownership?: BucketConfigs['ownership'];
  acl?: BucketConfigs['acl'];
  publicAccessBlock?: BucketConfigs['publicAccessBlock'];
  /** Its default encryption, when it has one (the data plane applies it to writes the gateway passes this record with). */
  encryption?: BucketConfigs['encryption'];
  /** Its server access logging, when it is on (the gateway records its requests). */
  logging?: BucketConfigs['logging'];
}

export type BucketConfigKind = keyof BucketConfigs;

/**
 * What the operations on a bucket's objects and configurations need of it: its row id (they work by
 * it, so a bucket deleted and created again under the name is never touched by a record of the old
 * one), its name (answers and events) and its owner. A bucket record the gateway authorised is one.
 */
export type BucketKey = Pick<Bucket, 'id' | 'name' | 'owner'>;

/** How long a deleted bucket's name stays with its last owner, measured from `now`. */
export interface BucketNameHold {
  now: Date;
  ms: number;
}

/** The internal API's ObjectMeta (hack/adr/0001). `etag` is unquoted. */
export type { ObjectMeta } from '../../../object-model/src/index.js';

/** One part of a multipart object: its size and, when its upload had a checksum algorithm, its checksum. */
export interface ObjectPart {
  partNumber: number;
  size: number;
  checksum?: string;
}

export interface StoredUser {
  username: string;
  passwordHash: string;
  accessKey: string;
  secretKeyEnc: string;
  isRoot: boolean;
  createdAt: string;
  /** Its e-mail address (grants by e-mail name it); unique whatever its case. */
  email?: string;
}

export interface ListQuery {
  prefix: string;
  delimiter: string;
  maxKeys: number;
  /** Exclusive lower bound as given by the client (start-after, or a v1 marker). */
  startAfter?: string;
  /** A v1 marker: when it falls inside a common prefix, that whole prefix was already listed. */
  marker?: string;
  /** Opaque token from a previous page (v2). */
  continuationToken?: string;
}

export interface ListPage {
  objects: ObjectMeta[];
  commonPrefixes: string[];
  isTruncated: boolean;
  nextContinuationToken?: string;
  nextMarker?: string;
}

export interface RecycledObject {
  id: number;
  bucket: string;
  key: string;
  size: number;
  recycledAt: string;
}

export interface RecycleBinQuery {
  owner?: string;
  bucket?: string;
  /** Keys starting with this. */
  prefix?: string;
  limit: number;
  /** The last object of the previous page (RecycleBinPage.next). */
  after?: RecycleBinCursor;
}

/** Where a recycle-bin page ended: its last object's bucket, key and id. */
export interface RecycleBinCursor {
  bucket: string;
  key: string;
  id: number;
}

export interface RecycleBinPage {
  objects: RecycledObject[];
  /** Set when more objects follow. */
  next?: RecycleBinCursor;
}

export interface BucketStats {
  objectCount: number;
  bytes: number;
}

/** Which objects a lifecycle expiration takes: by key prefix, size, and creation time. */
export interface ExpirySelection {
  prefix: string;
  /** Objects last written at or before this time. */
  createdNoLaterThan: Date;
  sizeGreaterThan?: number;
  sizeLessThan?: number;
  /** Objects that carry every one of these tags (and maybe others). */
  tags?: Tag[];
}

export interface PurgeResult {
  purged: number;
  /** Blobs whose last reference went away: the data plane frees their bytes. */
  unreferencedBlobIds: number[];
}

/** An event as it travels through the outbox and the broker. */
export interface StrataEvent {
  id: string;
  type: string;
  occurredAt: string;
  payload: Record<string, unknown>;
}

/** What a conditional delete requires of the object (DeleteObject's If-Match, ...; DeleteObjects' ETag, ...). */
export interface DeleteConditions {
  /** An If-Match list (`*`: any object). */
  ifMatch?: string;
  /** Its Last-Modified, to the second. */
  lastModifiedTime?: Date;
  size?: number;
}

/** Users and their credentials (the users table). */
export interface UserStore {
  /** A unique violation (23505) when the name or the e-mail address (whatever its case) is taken. */
  insert(user: Omit<StoredUser, 'createdAt' | 'isRoot'>): Promise<StoredUser>;
  /** Create or refresh the root user from its environment credentials. */
  upsertRoot(user: Omit<StoredUser, 'createdAt' | 'isRoot'>): Promise<void>;
  get(username: string): Promise<StoredUser | undefined>;
  getByAccessKey(accessKey: string): Promise<StoredUser | undefined>;
  /** The user with this e-mail address, matched whatever its case. */
  getByEmail(email: string): Promise<StoredUser | undefined>;
  /** Set (null: remove) a user's e-mail address; false when there is no such user; a unique violation when it is taken. */
  setEmail(username: string, email: string | null): Promise<boolean>;
}

/** A scoped access key as stored (key-scope.ts in the object model says what it may do). */
export interface StoredScopedKey {
  accessKey: string;
  /** The operator's name for it (one per ImageIndex); none for keys made through the admin API. */
  name?: string;
  parent: string;
  secretKeyEnc: string;
  scope: KeyScope;
  createdAt: string;
}

/** Scoped access keys (the scoped_keys table). */
export interface ScopedKeyStore {
  insert(key: Omit<StoredScopedKey, 'createdAt'>): Promise<StoredScopedKey>;
  getByAccessKey(accessKey: string): Promise<StoredScopedKey | undefined>;
  getByName(name: string): Promise<StoredScopedKey | undefined>;
  list(parent: string): Promise<StoredScopedKey[]>;
  setScope(accessKey: string, scope: KeyScope): Promise<void>;
  /** Whether it existed. */
  delete(accessKey: string): Promise<boolean>;
}

/** Buckets, their configurations and their counts. */
export interface BucketStore {
  /**
   * Creates the bucket, or answers the existing one (the caller decides which error that is). A name
   * that another account's bucket had until less than `nameHold.ms` ago is refused (S3Error
   * OperationAborted): replicas may still resolve it to that account from their caches.
   */
  create(
    name: string,
    owner: string,
    backend: BackendConfig,
    nameHold: BucketNameHold,
    configs?: Pick<Partial<BucketConfigs>, 'ownership' | 'acl'>,
  ): Promise<{ bucket: Bucket; created: boolean }>;
  get(name: string): Promise<Bucket | undefined>;
  /** Whether the bucket of this row id still exists. */
  exists(id: number): Promise<boolean>;
  /** The owner's buckets by name (byte order), the page `query` asks for. */
  list(owner: string, query?: ListBucketsQuery): Promise<Bucket[]>;
  /**
   * Deletes an empty bucket (its recycle bin is purged with it); false when it has NORMAL objects,
   * NoSuchBucket when it is gone. The name is then held for its owner (see create).
   */
  delete(bucket: BucketKey, now: Date): Promise<{ deleted: boolean; unreferencedBlobIds: number[] }>;
  stats(bucketId: number): Promise<BucketStats>;
  /** One of the bucket's configurations, as stored now; undefined when it has none. */
  getConfig<K extends BucketConfigKind>(bucket: BucketKey, kind: K): Promise<BucketConfigs[K] | undefined>;
  /** Replace one of the bucket's configurations (undefined removes it); NoSuchBucket when it is gone. */
  setConfig<K extends BucketConfigKind>(bucket: BucketKey, kind: K, value: BucketConfigs[K] | undefined): Promise<void>;
  /** Every bucket that has lifecycle rules, with its rules. */
  withLifecycle(): Promise<Array<{ bucket: Bucket; rules: LifecycleRule[] }>>;
}

/** The NORMAL objects of a bucket: one by key, and listed in key order. */
export interface ObjectStore {
  head(bucket: BucketKey, key: string): Promise<ObjectMeta | undefined>;
  /** The NORMAL object's parts in part order (none for an object uploaded whole); undefined when there is no such object. */
  parts(bucket: BucketKey, key: string): Promise<ObjectPart[] | undefined>;
  /** Replace the NORMAL object's tags (undefined or empty: none); false when there is no such object. */
  setTags(bucket: BucketKey, key: string, tags: Tag[] | undefined): Promise<boolean>;
  /** Keep an object's ACL (its stored header's value) or remove it (undefined); false when there is no such object. */
  setAcl(bucket: BucketKey, key: string, acl: string | undefined): Promise<boolean>;
  list(bucket: BucketKey, query: ListQuery): Promise<ListPage>;
}

/** Objects on their way out: NORMAL → RECYCLED → DELETED, and back from RECYCLED by a restore. */
export interface RecycleBin {
  /**
   * NORMAL → RECYCLED; false when there was no such object. With conditions (a conditional delete) the
   * object must meet them — PreconditionFailed otherwise, NoSuchKey when there is none — checked under
   * the key's write lock, so no write of the key slips between the check and the delete.
   */
  recycle(bucket: BucketKey, key: string, now: Date, conditions?: DeleteConditions): Promise<boolean>;
  /** Many keys NORMAL → RECYCLED at once (DeleteObjects), an object.recycled event each; answers those that had an object. */
  recycleMany(bucket: BucketKey, keys: string[], now: Date): Promise<string[]>;
  /**
   * NORMAL objects of the bucket that the selection names → RECYCLED (as DeleteObject does, with an
   * object.recycled event each), in batches of their own transactions; answers the keys recycled.
   */
  expire(bucket: Bucket, selection: ExpirySelection, now: Date): Promise<string[]>;
  /** Recycled objects by bucket name, key, newest version first; a page of `limit` and where the next starts. */
  list(filter: RecycleBinQuery): Promise<RecycleBinPage>;
  /** RECYCLED → NORMAL; a NORMAL object now holding the key goes to the recycle bin in its place. */
  restore(id: number, owner: string | undefined, now: Date): Promise<ObjectMeta | undefined>;
  /** RECYCLED objects recycled before `cutoff` → DELETED, releasing their blob references. */
  purge(cutoff: Date, now: Date): Promise<PurgeResult>;
  /**
   * Forget DELETED versions (overwritten, or purged from the recycle bin) deleted before `cutoff`: their
   * references were released when they became DELETED and nothing reads them, but every overwrite
   * leaves one, so without this the table grows with the write count instead of the object count.
   */
  pruneDeletedVersions(cutoff: Date): Promise<number>;
}

/** Events applied once each (the processed-event table), and the event logs. */
export interface EventInbox {
  /**
   * Apply the events' side effects once, atomically where it can (the object events in one
   * statement): one flag per event, false for an id already processed (or earlier in the same batch).
   * A single event is a batch of one. A failure may leave part of the batch applied; applying it
   * again is safe (every event is idempotent).
   */
  applyOnce(events: StrataEvent[]): Promise<boolean[]>;
  /** Forget sent outbox rows and processed event ids older than `cutoff` (redelivery is long over). */
  pruneLogs(cutoff: Date): Promise<{ outbox: number; processed: number }>;
}

/** The control plane's view of the metadata database (PostgreSQL or PGlite, same SQL), by aggregate. */
export interface MetadataStore {
  readonly users: UserStore;
  readonly scopedKeys: ScopedKeyStore;
  readonly buckets: BucketStore;
  readonly objects: ObjectStore;
  readonly recycleBin: RecycleBin;
  readonly inbox: EventInbox;
  ping(): Promise<void>;
}
