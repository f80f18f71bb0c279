import express, { type Request, type Router } from 'express';
import { type Logger, type SecretBox, type StringCache } from '../../../service-kit/src/index.js';
import {
  aclHeaders,
  assertBucketName,
  isStoredAcl,
  OBJECT_ACL_HEADER,
  assertObjectKey,
  readBucketConfigBody,
  readCreateBucketBody,
  readDeleteEntry,
  readDeleteConditions,
  readDeleteObjectsBody,
  readListBucketsQuery,
  readListObjectsQuery,
  readObjectAclBody,
  readObjectTagsBody,
  readPurgeBody,
  readRecycleBinQuery,
  readRestoreInput,
  readUserBody,
  readUserChangeBody,
  S3Error,
  FS_BACKEND_OFF,
} from '../../../object-model/src/index.js';
import { invalidateObjectRead } from '../../../object-model/src/object-read-cache.js';
import type { BackendConfig, Bucket, BucketConfigKind, BucketKey, DeleteConditions, MetadataStore, RecycleBinCursor } from '../metadata/store.js';
import type { BackendCheck } from '../backends/backend-check.js';
import type { BlobCollector } from '../purge/data-plane-gc.js';
import type { UploadExpirer } from '../purge/lifecycle-job.js';
import type { PurgeRunResult } from '../purge/purge-job.js';
import type { UserService } from '../users/user-service.js';
import { AdminJobs } from './admin-jobs.js';
import { RequestBuckets } from './request-bucket.js';

export interface RouteDeps {
  store: MetadataStore;
  users: UserService;
  cache: StringCache;
  collector: BlobCollector;
  /** Ends the uploads of a deleted bucket (the data plane keeps them). */
  uploads: UploadExpirer;
  /** Asked before a bucket is created on a backend other than fs (the data plane owns backends). */
  checkBackend?: BackendCheck;
  /** Seals a bucket's own backend secret key before it is stored (the data plane opens it). */
  secrets: SecretBox;
  purge: (now: Date) => Promise<PurgeRunResult>;
  clock: () => Date;
  /** How long a deleted bucket's name stays with its last owner (ms; see BucketStore.create). */
  bucketNameHoldMs: number;
  /** Whether new buckets may use the fs backend. */
  fsBackend: boolean;
  logger: Logger;
}

/** A recycle-bin page's nextToken back to where it ended; InvalidArgument for anything else. */
function recycleBinCursor(token: string): RecycleBinCursor {
  try {
    const c = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Partial<RecycleBinCursor>;
    if (typeof c.bucket === 'string' && typeof c.key === 'string' && Number.isSafeInteger(c.id)) return { bucket: c.bucket, key: c.key, id: c.id! };
  } catch {
    // not JSON: refused below
  }
  throw new S3Error('InvalidArgument', 'The continuation token is not one this listing gave.');
}

function param(req: Request, name: string): string {
  return String(req.params[name]);
}

/** The control plane's internal API (hack/adr/0001-object-store-internal-api.md). */
export function controlPlaneRoutes(deps: RouteDeps): Router {
  const { store, users, cache } = deps;
  const router = express.Router();
  const jobs = new AdminJobs(deps.clock, deps.logger, cache);

  // GetBucket (the gateway's resolution) reads the record from the database, uncached: the gateway's
  // cache is the only one that resolves bucket names (hack/adr/0007-bucket-resolution.md).
  const mustBucket = async (name: string): Promise<Bucket> => {
    const bucket = await store.buckets.get(name);
    if (!bucket) throw new S3Error('NoSuchBucket', undefined, { BucketName: name });
    return bucket;
  };
  // The other routes serve the bucket the gateway authorised (x-strata-bucket), by its id.
  const requestBuckets = new RequestBuckets(store.buckets);
  const bucketOf = (req: Request) => requestBuckets.of(req, param(req, 'bucket'));
  /** Nothing found in `bucket`: NoSuchBucket if the bucket is gone, else `missing` (when given). */
  const nothingIn = async (bucket: BucketKey, missing?: S3Error): Promise<void> => {
    await requestBuckets.confirm(bucket);
    if (missing) throw missing;
  };
  /** The bucket (NoSuchBucket) and the checked key of an object route. */
  const objectPath = async (req: Request): Promise<{ bucket: BucketKey; key: string }> => {
    const bucket = await bucketOf(req);
    const key = param(req, 'key');
    assertObjectKey(key);
    return { bucket, key };
  };
  const freeBlobs = async (blobIds: number[]) => {
    try {
      return await deps.collector.collect(blobIds);
    } catch (err) {
      deps.logger.warn({ err, blobs: blobIds.length }, 'freeing blob bytes failed; the data plane sweep will retry');
      return 0;
    }
  };

  router.post('/users', async (req, res) => {
    const { username, password, email } = readUserBody(req.body);
    res.status(201).json(await users.createUser(username, password, email));
  });
  router.patch('/users/:username', async (req, res) => {
    res.json(await users.setEmail(param(req, 'username'), readUserChangeBody(req.body).email));
  });
  // A grant by e-mail address: the user it names (400 UnresolvableGrantByEmailAddress when none has it).
  router.get('/user-emails/:email', async (req, res) => {
    res.json(await users.userByEmail(param(req, 'email')));
  });
  router.post('/users/verify', async (req, res) => {
    const { username, password } = readUserBody(req.body);
    res.json(await users.verify(username, password));
  });
  router.get('/credentials/:accessKey', async (req, res) => {
    res.json(await users.credentials(param(req, 'accessKey')));
  });
  router.get('/users/:username/buckets', async (req, res) => {
    const buckets = await store.buckets.list(param(req, 'username'), readListBucketsQuery(req.query));
    res.json({ buckets: buckets.map((b) => ({ name: b.name, createdAt: b.createdAt, backend: { kind: b.backend.kind } })) });
  });

  router.put('/buckets/:bucket', async (req, res) => {
    const name = param(req, 'bucket');
    assertBucketName(name);
    const { owner, backend, ownership, acl } = readCreateBucketBody(req.body);
    if (backend.kind === 'fs' && !deps.fsBackend) throw new S3Error('InvalidArgument', FS_BACKEND_OFF, { ArgumentName: 'x-strata-backend' });
    // No bucket may exist on a backend that is not usable (unknown settings, unreachable): check first.
    if (backend.kind !== 'fs' && deps.checkBackend && !(await store.buckets.get(name))) await deps.checkBackend(backend);
    const { bucket, created } = await store.buckets.create(
      name,
      owner,
      sealBackendSecret(backend, deps.secrets),
      { now: deps.clock(), ms: deps.bucketNameHoldMs },
      { ownership, acl },
    );
    if (!created) {
      throw new S3Error(bucket.owner === owner ? 'BucketAlreadyOwnedByYou' : 'BucketAlreadyExists', undefined, { BucketName: name });
    }
    res.json(publicBucket(bucket));
  });
  router.get('/buckets/:bucket', async (req, res) => {
    const bucket = await mustBucket(param(req, 'bucket'));
    res.json({ ...publicBucket(bucket), stats: await store.buckets.stats(bucket.id) });
  });
  router.delete('/buckets/:bucket', async (req, res) => {
    const bucket = await bucketOf(req);
    const { deleted, unreferencedBlobIds } = await store.buckets.delete(bucket, deps.clock());
    if (!deleted) throw new S3Error('BucketNotEmpty', undefined, { BucketName: bucket.name });
    await freeBlobs(unreferencedBlobIds);
    // As S3: uploads in progress do not keep a bucket, and end with it. Already unreachable (they belong
    // to the deleted bucket's id), so a failure here only leaves them to their TTL and the part sweep.
    await deps.uploads
      .abortBucketUploads(bucket.id)
      .catch((err: unknown) =>
        deps.logger.warn({ err, bucket: bucket.name }, "aborting a deleted bucket's uploads failed; their TTL and the part sweep end them"),
      );
    res.status(204).end();
  });

  // A bucket's configurations (lifecycle rules, CORS rules, tags), kept with its record.
  for (const [kind, missing] of Object.entries(MISSING_CONFIG) as Array<[BucketConfigKind, (typeof MISSING_CONFIG)[BucketConfigKind]]>) {
    const readRules = readBucketConfigBody(kind);
    router.get(`/buckets/:bucket/${kind}`, async (req, res) => {
      const bucket = await bucketOf(req);
      const rules = await store.buckets.getConfig(bucket, kind);
      if (!rules && missing) throw new S3Error(missing, undefined, { BucketName: bucket.name });
      res.json({ rules: rules ?? [] });
    });
    router.put(`/buckets/:bucket/${kind}`, async (req, res) => {
      // The gateway validated the rules against S3's schema; here only their outline is checked.
      const { rules } = readRules(req.body);
      const bucket = await bucketOf(req);
      await store.buckets.setConfig(bucket, kind, rules);
      res.status(204).end();
    });
    router.delete(`/buckets/:bucket/${kind}`, async (req, res) => {
      const bucket = await bucketOf(req);
      await store.buckets.setConfig(bucket, kind, undefined);
      res.status(204).end();
    });
  }

  router.get('/buckets/:bucket/objects', async (req, res) => {
    const query = readListObjectsQuery(req.query);
    const bucket = await bucketOf(req);
    const page = await store.objects.list(bucket, query);
    if (page.objects.length === 0 && page.commonPrefixes.length === 0) await nothingIn(bucket);
    res.json(page);
  });
  router.get('/buckets/:bucket/objects/:key', async (req, res) => {
    const { bucket, key } = await objectPath(req);
    const meta = await store.objects.head(bucket, key);
    if (!meta) await nothingIn(bucket, new S3Error('NoSuchKey', undefined, { Key: key }));
    res.json(meta);
  });
  // GetObjectAttributes ObjectParts: a multipart object's parts (an empty list for one uploaded whole).
  router.get('/buckets/:bucket/objects/:key/parts', async (req, res) => {
    const { bucket, key } = await objectPath(req);
    const parts = await store.objects.parts(bucket, key);
    if (!parts) await nothingIn(bucket, new S3Error('NoSuchKey', undefined, { Key: key }));
    res.json({ parts });
  });
  // PutObjectTagging / DeleteObjectTagging (an empty list): the object's tags, read back by GET above.
  router.put('/buckets/:bucket/objects/:key/tagging', async (req, res) => {
    const { tags } = readObjectTagsBody(req.body);
    const { bucket, key } = await objectPath(req);
    if (!(await store.objects.setTags(bucket, key, tags))) await nothingIn(bucket, new S3Error('NoSuchKey', undefined, { Key: key }));
    // Answers of GET/HEAD carry the tag count: cached ones end here.
    await invalidateObjectRead(cache, bucket.name, key);
    res.status(204).end();
  });
  // PutObjectAcl: the ACL kept among the object's stored headers (object-model access-control.ts); null removes it.
  router.put('/buckets/:bucket/objects/:key/acl', async (req, res) => {
    const { acl } = readObjectAclBody(req.body);
    const { bucket, key } = await objectPath(req);
    const stored = acl === undefined ? undefined : aclHeaders(acl)[OBJECT_ACL_HEADER]!;
    if (stored !== undefined && !isStoredAcl(stored)) throw new S3Error('MalformedACLError', 'acl must be {owner, grants} of Strata users and groups');
    if (!(await store.objects.setAcl(bucket, key, stored))) await nothingIn(bucket, new S3Error('NoSuchKey', undefined, { Key: key }));
    await invalidateObjectRead(cache, bucket.name, key);
    res.status(204).end();
  });
  router.delete('/buckets/:bucket/objects/:key', async (req, res) => {
    const conditions = readDeleteConditions(req.query);
    const { bucket, key } = await objectPath(req);
    const recycled = await store.recycleBin.recycle(bucket, key, deps.clock(), conditions).catch(async (err: unknown) => {
      if (err instanceof S3Error && err.code === 'NoSuchKey') await nothingIn(bucket);
      throw err;
    });
    if (!recycled) await nothingIn(bucket);
    // The data plane's GET/HEAD cache (object-model/object-read-cache.ts), before answering.
    await invalidateObjectRead(cache, bucket.name, key);
    res.status(204).end();
  });
  // `objects`: [{key, ifMatch?, lastModifiedTime?, size?}] (conditional deletes); `keys`: plain keys.
  router.post('/buckets/:bucket/delete-objects', async (req, res) => {
    const objects = readDeleteObjectsBody(req.body);
    const bucket = await bucketOf(req);
    // Each entry's outcome by its position in the request: deleted, or its error.
    const outcomes: Array<{ key: string; error?: { code: string; message: string } }> = [];
    const failed = (at: number, key: unknown, err: unknown) => {
      if (!(err instanceof S3Error)) throw err;
      outcomes[at] = { key: String(key), error: { code: err.code, message: err.message } };
    };
    // Plain keys go in one statement (one commit, not one per key); conditional ones one by one.
    const plain: string[] = [];
    const conditional: Array<{ at: number; key: string; conditions: DeleteConditions }> = [];
    objects.forEach((object, at) => {
      const key = typeof object === 'object' && object !== null ? (object as { key?: unknown }).key : undefined;
      try {
        const entry = readDeleteEntry(object);
        assertObjectKey(entry.key);
        const { conditions } = entry;
        if (conditions) conditional.push({ at, key: entry.key, conditions });
        else plain.push(entry.key);
        outcomes[at] = { key: entry.key };
      } catch (err) {
        failed(at, key, err);
      }
    });
    if ((await store.recycleBin.recycleMany(bucket, plain, deps.clock())).length < plain.length) await nothingIn(bucket);
    for (const { at, key, conditions } of conditional) {
      try {
        await store.recycleBin.recycle(bucket, key, deps.clock(), conditions);
      } catch (err) {
        if (err instanceof S3Error && err.code === 'NoSuchKey') await nothingIn(bucket);
        failed(at, key, err);
      }
    }
    const deleted = outcomes.filter((o) => !o.error).map((o) => o.key);
    // The data plane's GET/HEAD cache, before answering.
    await Promise.all(deleted.map((key) => invalidateObjectRead(cache, bucket.name, key)));
    res.json({ deleted, errors: outcomes.filter((o) => o.error).map((o) => ({ key: o.key, ...o.error })) });
  });

  // A page of the recycle bin: `limit` (1-1000, default 1000), `prefix`, `after` (a page's nextToken).
  router.get('/recycle-bin', async (req, res) => {
    const { after: token, ...q } = readRecycleBinQuery(req.query);
    const after = token === undefined ? undefined : recycleBinCursor(token);
    const page = await store.recycleBin.list({ ...q, after });
    res.json({ objects: page.objects, ...(page.next ? { nextToken: Buffer.from(JSON.stringify(page.next)).toString('base64url') } : {}) });
  });
  router.post('/recycle-bin/:id/restore', async (req, res) => {
    const { id, owner } = readRestoreInput(param(req, 'id'), req.body);
    const meta = await store.recycleBin.restore(id, owner, deps.clock());
    if (!meta) throw new S3Error('NoSuchKey', 'no such object in the recycle bin');
    await invalidateObjectRead(cache, meta.bucket, meta.key);
    res.json(meta);
  });
  // Long work answers 202 with its job at once; GET /jobs/:id tells how it went (admin-jobs.ts).
  router.post('/purge', async (req, res) => {
    const now = readPurgeBody(req.body).now ?? deps.clock();
    const job = await jobs.start('purge', () => deps.purge(now));
    res.status(202).location(`/internal/jobs/${job.id}`).json(job);
  });
  router.get('/jobs/:id', async (req, res) => {
    res.json(await jobs.get(param(req, 'id')));
  });

  return router;
}

/** Per configuration: the answer when the bucket has none; without one, an empty list. */
const MISSING_CONFIG: Record<
  BucketConfigKind,
  | 'NoSuchLifecycleConfiguration'
  | 'NoSuchCORSConfiguration'
  | 'NoSuchTagSet'
  | 'OwnershipControlsNotFoundError'
  | 'NoSuchPublicAccessBlockConfiguration'
  | 'ServerSideEncryptionConfigurationNotFoundError'
  | undefined
> = {
  lifecycle: 'NoSuchLifecycleConfiguration',
  cors: 'NoSuchCORSConfiguration',
  tags: 'NoSuchTagSet',
  ownership: 'OwnershipControlsNotFoundError',
  // A bucket without grants is private to its owner: no error, no grants.
  acl: undefined,
  publicAccessBlock: 'NoSuchPublicAccessBlockConfiguration',
  encryption: 'ServerSideEncryptionConfigurationNotFoundError',
  // Logging off is an empty BucketLoggingStatus, not an error.
  logging: undefined,
};

/** An operator-made bucket's backend secret key, stored only sealed (secretKeySealed) — never in clear text. */
function sealBackendSecret(backend: BackendConfig, secrets: SecretBox): BackendConfig {
  if (typeof backend.secretKey !== 'string') return backend;
  const { secretKey, ...rest } = backend;
  return { ...rest, secretKeySealed: secrets.seal(secretKey) };
}

function publicBucket(b: Bucket) {
  // A bucket's own backend credentials (operator-made buckets) stay in the database: no caller needs them back.
  const { accessKey: _accessKey, secretKey: _secretKey, secretKeySealed: _sealed, ...backend } = b.backend;
  return {
    // (Its id and default encryption: the gateway hands the record it authorised a write against to the data plane.)
    id: b.id,
    name: b.name,
    owner: b.owner,
    createdAt: b.createdAt,
    backend,
    ...(b.lifecycle ? { lifecycle: b.lifecycle } : {}),
    ...(b.cors ? { cors: b.cors } : {}),
    ...(b.ownership ? { ownership: b.ownership } : {}),
    ...(b.acl ? { acl: b.acl } : {}),
    ...(b.publicAccessBlock ? { publicAccessBlock: b.publicAccessBlock } : {}),
    ...(b.encryption ? { encryption: b.encryption } : {}),
    ...(b.logging ? { logging: b.logging } : {}),
  };
}
