import {
  ADMIN_JOB_ANSWER,
  BUCKET_INFO_ANSWER,
  BUCKET_LISTING_ANSWER,
  bucketConfigAnswer,
  DELETE_OBJECTS_ANSWER,
  LIST_OBJECTS_ANSWER,
  NO_ANSWER,
  OBJECT_META_ANSWER,
  OBJECT_PARTS_ANSWER,
  RECYCLE_BIN_ANSWER,
  SCOPED_KEY_ANSWER,
  SCOPED_KEYS_ANSWER,
  USER_ANSWER,
  USER_CREDENTIALS_ANSWER,
  VERIFIED_USER_ANSWER,
  type AccessControlList,
  type AdminJob,
  type BackendRef,
  type BucketConfigs,
  type BucketInfo,
  type NewBucketAccess,
  type BucketListing,
  type DeleteConditions,
  type DeleteObjectsResult,
  type ListBucketsQuery,
  type ListObjectsQuery,
  type ListObjectsResult,
  type ObjectMeta,
  type StoredPart,
  type Tag,
  type KeyScope,
  type ScopedKeyCredentials,
} from '../../../object-model/src/index.js';
import { bucketRecordHeader } from './bucket-record-header.js';
import { InternalHttp, type Guard, seg } from './internal-http.js';

export interface UserCredentials {
  username: string;
  accessKey: string;
  secretKey: string;
  /** A scoped key's limits (`username` is its parent's). */
  scope?: KeyScope;
  /** A new user's e-mail address, when it was given one. */
  email?: string;
}
/** A user as shown: its name and e-mail address (when it has one). */
export interface UserView {
  username: string;
  email?: string;
}
export interface RecycledObject {
  id: string | number;
  bucket: string;
  key: string;
  size: number;
  recycledAt: string;
}

/** A breaker scope for an account's calls that name no bucket (bucket names hold no ':'). */
const accountScope = (owner: string) => `account:${owner}`;

/**
 * Typed client for the control plane: users, credentials, buckets, object metadata, recycle bin. Calls
 * about one bucket (or one account's listings) are guarded in that scope, so that one tenant's failing
 * calls (a listing that times out) never open the circuit for the others; users and credentials, which
 * every tenant's requests need, share the upstream's own breaker.
 */
export class ControlPlaneClient {
  readonly http: InternalHttp;

  constructor(baseUrl: string, token: string, guard?: Guard) {
    this.http = new InternalHttp(baseUrl, token, 'control plane', guard);
  }

  createUser(username: string, password: string, email?: string): Promise<UserCredentials> {
    return this.http.json('POST', '/internal/users', USER_CREDENTIALS_ANSWER, { body: { username, password, ...(email === undefined ? {} : { email }) } });
  }

  /** Give a user an e-mail address (null: none); 409 when another user has it. */
  setUserEmail(username: string, email: string | null): Promise<UserView> {
    return this.http.json('PATCH', `/internal/users/${seg(username)}`, USER_ANSWER, { body: { email } });
  }

  /** The user with this e-mail address (any case); UnresolvableGrantByEmailAddress when none has it. */
  userByEmail(email: string): Promise<UserView> {
    return this.http.json('GET', `/internal/user-emails/${seg(email)}`, USER_ANSWER);
  }

  verifyUser(username: string, password: string): Promise<{ username: string; accessKey: string }> {
    return this.http.json('POST', '/internal/users/verify', VERIFIED_USER_ANSWER, { body: { username, password } });
  }

  credentials(accessKey: string): Promise<UserCredentials> {
    return this.http.json('GET', `/internal/credentials/${seg(accessKey)}`, USER_CREDENTIALS_ANSWER);
  }

  createScopedKey(parent: string, scope: KeyScope): Promise<ScopedKeyCredentials> {
    return this.http.json('POST', '/internal/scoped-keys', SCOPED_KEY_ANSWER, { body: { parent, ...scope } });
  }

  async listScopedKeys(parent: string): Promise<Array<{ accessKey: string; parent: string; scope: KeyScope; createdAt: string; name?: string }>> {
    return (await this.http.json('GET', `/internal/users/${seg(parent)}/scoped-keys`, SCOPED_KEYS_ANSWER)).keys;
  }

  /** Delete a scoped key of `parent` (any parent's: undefined); InvalidAccessKeyId when there is none. */
  async deleteScopedKey(accessKey: string, parent: string | undefined): Promise<void> {
    await this.http.json('DELETE', `/internal/scoped-keys/${seg(accessKey)}`, NO_ANSWER, { query: parent === undefined ? {} : { parent } });
  }

  async listBuckets(owner: string, q: ListBucketsQuery = {}): Promise<BucketListing[]> {
    const query = { prefix: q.prefix, after: q.after, limit: q.limit, names: q.names?.join(',') };
    const r = await this.http.json('GET', `/internal/users/${seg(owner)}/buckets`, BUCKET_LISTING_ANSWER, { query, scope: accountScope(owner) });
    return r.buckets;
  }

  createBucket(bucket: string, owner: string, backend?: BackendRef, access: NewBucketAccess = {}): Promise<BucketInfo> {
    return this.http.json('PUT', `/internal/buckets/${seg(bucket)}`, BUCKET_INFO_ANSWER, {
      body: { owner, ...(backend ? { backend } : {}), ...access },
      scope: bucket,
    });
  }

  getBucket(bucket: string): Promise<BucketInfo> {
    return this.http.json('GET', `/internal/buckets/${seg(bucket)}`, BUCKET_INFO_ANSWER, { scope: bucket });
  }

  async deleteBucket(bucket: string, bucketRecord?: BucketInfo): Promise<void> {
    await this.http.json('DELETE', `/internal/buckets/${seg(bucket)}`, NO_ANSWER, { headers: bucketRecordHeader(bucketRecord), scope: bucket });
  }

  /** One of the bucket's configurations (NoSuchLifecycleConfiguration / NoSuchCORSConfiguration / NoSuchTagSet when it has none). */
  async getBucketConfig<K extends keyof BucketConfigs>(bucket: string, kind: K, bucketRecord?: BucketInfo): Promise<BucketConfigs[K]> {
    return (await this.http.json('GET', `/internal/buckets/${seg(bucket)}/${kind}`, bucketConfigAnswer(kind), { headers: bucketRecordHeader(bucketRecord) }))
      .rules;
  }

  /** Replace one of the bucket's configurations; undefined removes it. */
  async putBucketConfig<K extends keyof BucketConfigs>(bucket: string, kind: K, rules: BucketConfigs[K] | undefined, bucketRecord?: BucketInfo): Promise<void> {
    const headers = bucketRecordHeader(bucketRecord);
    if (rules) await this.http.json('PUT', `/internal/buckets/${seg(bucket)}/${kind}`, NO_ANSWER, { body: { rules }, headers, scope: bucket });
    else await this.http.json('DELETE', `/internal/buckets/${seg(bucket)}/${kind}`, NO_ANSWER, { headers, scope: bucket });
  }

  listObjects(bucket: string, q: ListObjectsQuery, bucketRecord?: BucketInfo): Promise<ListObjectsResult> {
    return this.http.json('GET', `/internal/buckets/${seg(bucket)}/objects`, LIST_OBJECTS_ANSWER, {
      query: { ...q },
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  headObject(bucket: string, key: string, bucketRecord?: BucketInfo): Promise<ObjectMeta> {
    return this.http.json('GET', `/internal/buckets/${seg(bucket)}/objects/${seg(key)}`, OBJECT_META_ANSWER, {
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  /** A multipart object's parts in part order (none for an object uploaded whole). */
  async objectParts(bucket: string, key: string, bucketRecord?: BucketInfo): Promise<StoredPart[]> {
    const path = `/internal/buckets/${seg(bucket)}/objects/${seg(key)}/parts`;
    return (await this.http.json('GET', path, OBJECT_PARTS_ANSWER, { headers: bucketRecordHeader(bucketRecord) })).parts;
  }

  /** Replace the object's tags (none: remove them); NoSuchKey when there is no such object. */
  async putObjectTags(bucket: string, key: string, tags: Tag[], bucketRecord?: BucketInfo): Promise<void> {
    await this.http.json('PUT', `/internal/buckets/${seg(bucket)}/objects/${seg(key)}/tagging`, NO_ANSWER, {
      body: { tags },
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  /** Replace the ACL kept with the object (undefined: none); NoSuchKey when there is no such object. */
  async putObjectAcl(bucket: string, key: string, acl: AccessControlList | undefined, bucketRecord?: BucketInfo): Promise<void> {
    await this.http.json('PUT', `/internal/buckets/${seg(bucket)}/objects/${seg(key)}/acl`, NO_ANSWER, {
      body: { acl: acl ?? null },
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  /** Soft delete; with conditions, NoSuchKey or PreconditionFailed unless the object meets them. */
  async deleteObject(bucket: string, key: string, conditions?: DeleteConditions, bucketRecord?: BucketInfo): Promise<void> {
    await this.http.json('DELETE', `/internal/buckets/${seg(bucket)}/objects/${seg(key)}`, NO_ANSWER, {
      query: { ...conditions },
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  deleteObjects(bucket: string, objects: Array<{ key: string } & DeleteConditions>, bucketRecord?: BucketInfo): Promise<DeleteObjectsResult> {
    return this.http.json('POST', `/internal/buckets/${seg(bucket)}/delete-objects`, DELETE_OBJECTS_ANSWER, {
      body: { objects },
      headers: bucketRecordHeader(bucketRecord),
      scope: bucket,
    });
  }

  /** A page of the owner's recycle bin (`limit` ≤ 1000); `nextToken` when more follow. */
  recycleBin(
    owner: string,
    q: { bucket?: string; prefix?: string; limit?: number; after?: string } = {},
  ): Promise<{ objects: RecycledObject[]; nextToken?: string }> {
    return this.http.json('GET', '/internal/recycle-bin', RECYCLE_BIN_ANSWER, { query: { owner, ...q }, scope: accountScope(owner) });
  }

  restore(id: string, owner: string): Promise<ObjectMeta> {
    return this.http.json('POST', `/internal/recycle-bin/${seg(id)}/restore`, OBJECT_META_ANSWER, { body: { owner }, scope: accountScope(owner) });
  }

  /** Starts the purge (lifecycle rules, then the recycle bin) as a job: answers it at once, `running`. */
  purge(now?: string): Promise<AdminJob> {
    return this.http.json('POST', '/internal/purge', ADMIN_JOB_ANSWER, { body: now ? { now } : {} });
  }

  /** An admin job's status; NoSuchJob when the control plane does not know it (e.g. it restarted). */
  job(id: string): Promise<AdminJob> {
    return this.http.json('GET', `/internal/jobs/${seg(id)}`, ADMIN_JOB_ANSWER);
  }
}
