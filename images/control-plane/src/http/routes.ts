import express, { type Request, type Router } from 'express';
import { type Logger, type SecretBox, type StringCache } from '../../../service-kit/src/index.js';
import {
  aclHeaders,
  assertBucketName,
  isStoredAcl,
  OBJECT_ACL_HEADER,
  type AccessControlList,
  assertObjectKey,
  MAX_BUCKET_TAGS,
  MAX_CORS_RULES,
  MAX_GRANTS,
  MAX_LIFECYCLE_RULES,
  OBJECT_OWNERSHIPS,
  objectTagsFromJson,
  PERMISSIONS,
  readPageSize,
  S3Error,
  type ObjectOwnership,
  type Permission,
} from '../../../object-model/src/index.js';
import { invalidateObjectRead } from '../../../object-model/src/object-read-cache.js';
import type { BackendConfig, Bucket, BucketConfigKind, BucketConfigs, DeleteConditions, MetadataStore, RecycleBinCursor } from '../metadata/store.js';
import type { BackendCheck } from '../backends/backend-check.js';
import type { BlobCollector } from '../purge/data-plane-gc.js';
import type { UploadExpirer } from '../purge/lifecycle-job.js';
import type { PurgeRunResult } from '../purge/purge-job.js';
import type { UserService } from '../users/user-service.js';
import { AdminJobs } from './admin-jobs.js';

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
  logger: Logger;
}

const BACKEND_KINDS = new Set(['fs', 'minio', 'cloud']);

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** A conditional delete's requirements from an internal request's fields (query strings or JSON); none: undefined. */
function deleteConditions(fields: Record<string, unknown>): DeleteConditions | undefined {
  const c: DeleteConditions = {};
  if (typeof fields.ifMatch === 'string') c.ifMatch = fields.ifMatch;
  if (fields.lastModifiedTime !== undefined) {
    const t = new Date(String(fields.lastModifiedTime));
    if (Number.isNaN(t.getTime())) throw new S3Error('InvalidArgument', 'lastModifiedTime must be a timestamp');
    c.lastModifiedTime = t;
  }
  if (fields.size !== undefined) {
    const n = Number(fields.size);
    if (!/^\d+$/.test(String(fields.size)) || !Number.isSafeInteger(n)) throw new S3Error('InvalidArgument', 'size must be a whole number of bytes');
    c.size = n;
  }
  return Object.keys(c).length ? c : undefined;
}

const RECYCLE_BIN_PAGE = 1000;

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
  const jobs = new AdminJobs(deps.clock, deps.logger);

  // Bucket records are read from the database, uncached: the gateway's cache is the only one that
  // resolves bucket names (hack/adr/0007-bucket-resolution.md), so this answer is never stale.
  const mustBucket = async (name: string): Promise<Bucket> => {
    const bucket = await store.buckets.get(name);
    if (!bucket) throw new S3Error('NoSuchBucket', undefined, { BucketName: name });
    return bucket;
  };
  /** The bucket (NoSuchBucket) and the checked key of an object route. */
  const objectPath = async (req: Request): Promise<{ bucket: Bucket; key: string }> => {
    const bucket = await mustBucket(param(req, 'bucket'));
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
    res.status(201).json(await users.createUser(req.body?.username, req.body?.password));
  });
  router.post('/users/verify', async (req, res) => {
    res.json(await users.verify(req.body?.username, req.body?.password));
  });
  router.get('/credentials/:accessKey', async (req, res) => {
    res.json(await users.credentials(param(req, 'accessKey')));
  });
  router.get('/users/:username/buckets', async (req, res) => {
    const buckets = await store.buckets.list(param(req, 'username'));
    res.json({ buckets: buckets.map((b) => ({ name: b.name, createdAt: b.createdAt, backend: { kind: b.backend.kind } })) });
  });

  router.put('/buckets/:bucket', async (req, res) => {
    const name = param(req, 'bucket');
    assertBucketName(name);
    const owner = str(req.body?.owner);
    if (!owner) throw new S3Error('InvalidArgument', 'owner is required');
    const backend = (req.body?.backend ?? { kind: 'fs' }) as BackendConfig;
    if (typeof backend !== 'object' || !BACKEND_KINDS.has(String(backend.kind))) {
      throw new S3Error('InvalidArgument', 'backend.kind must be one of fs, minio, cloud');
    }
    // No bucket may exist on a backend that is not usable (unknown settings, unreachable): check first.
    if (backend.kind !== 'fs' && deps.checkBackend && !(await store.buckets.get(name))) await deps.checkBackend(backend);
    const { bucket, created } = await store.buckets.create(name, owner, sealBackendSecret(backend, deps.secrets), {
      now: deps.clock(),
      ms: deps.bucketNameHoldMs,
    });
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
    const bucket = await mustBucket(param(req, 'bucket'));
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
  for (const [kind, config] of Object.entries(BUCKET_CONFIGS) as Array<[BucketConfigKind, (typeof BUCKET_CONFIGS)[BucketConfigKind]]>) {
    router.get(`/buckets/:bucket/${kind}`, async (req, res) => {
      const bucket = await mustBucket(param(req, 'bucket'));
      const rules = await store.buckets.getConfig(bucket, kind);
      if (!rules && config.missing) throw new S3Error(config.missing, undefined, { BucketName: bucket.name });
      res.json({ rules: rules ?? [] });
    });
    router.put(`/buckets/:bucket/${kind}`, async (req, res) => {
      const bucket = await mustBucket(param(req, 'bucket'));
      // The gateway validated the rules against S3's schema; here only their outline is checked.
      const rules: unknown = req.body?.rules;
      if (!Array.isArray(rules) || rules.length === 0 || rules.length > config.max || !rules.every(config.outline)) {
        throw new S3Error('MalformedXML', `rules must be a list of 1 to ${config.max} ${kind} rules`);
      }
      await store.buckets.setConfig(bucket, kind, rules as BucketConfigs[typeof kind]);
      res.status(204).end();
    });
    router.delete(`/buckets/:bucket/${kind}`, async (req, res) => {
      const bucket = await mustBucket(param(req, 'bucket'));
      await store.buckets.setConfig(bucket, kind, undefined);
      res.status(204).end();
    });
  }

  router.get('/buckets/:bucket/objects', async (req, res) => {
    const bucket = await mustBucket(param(req, 'bucket'));
    const q = req.query;
    const maxKeys = readPageSize(str(q.maxKeys) ?? str(q['max-keys']), 'max-keys');
    const prefix = str(q.prefix) ?? '';
    const page = await store.objects.list(bucket, {
      prefix,
      delimiter: str(q.delimiter) ?? '',
      maxKeys,
      startAfter: str(q.startAfter) ?? str(q['start-after']),
      marker: str(q.marker),
      continuationToken: str(q.continuationToken) ?? str(q['continuation-token']),
    });
    res.json(page);
  });
  router.get('/buckets/:bucket/objects/:key', async (req, res) => {
    const { bucket, key } = await objectPath(req);
    const meta = await store.objects.head(bucket, key);
    if (!meta) throw new S3Error('NoSuchKey', undefined, { Key: key });
    res.json(meta);
  });
  // GetObjectAttributes ObjectParts: a multipart object's parts (an empty list for one uploaded whole).
  router.get('/buckets/:bucket/objects/:key/parts', async (req, res) => {
    const { bucket, key } = await objectPath(req);
    const parts = await store.objects.parts(bucket, key);
    if (!parts) throw new S3Error('NoSuchKey', undefined, { Key: key });
    res.json({ parts });
  });
  // PutObjectTagging / DeleteObjectTagging (an empty list): the object's tags, read back by GET above.
  router.put('/buckets/:bucket/objects/:key/tagging', async (req, res) => {
    const { bucket, key } = await objectPath(req);
    const tags = objectTagsFromJson(req.body?.tags);
    if (!tags) throw new S3Error('InvalidTag', 'tags must be a list of {key, value}');
    if (!(await store.objects.setTags(bucket, key, tags))) throw new S3Error('NoSuchKey', undefined, { Key: key });
    // Answers of GET/HEAD carry the tag count: cached ones end here.
    await invalidateObjectRead(cache, bucket.name, key);
    res.status(204).end();
  });
  // PutObjectAcl: the ACL kept among the object's stored headers (object-model access-control.ts); null removes it.
  router.put('/buckets/:bucket/objects/:key/acl', async (req, res) => {
    const { bucket, key } = await objectPath(req);
    const acl: unknown = req.body?.acl;
    const stored = acl === null ? undefined : aclHeaders(acl as AccessControlList)[OBJECT_ACL_HEADER]!;
    if (stored !== undefined && !isStoredAcl(stored)) throw new S3Error('MalformedACLError', 'acl must be {owner, grants} of Strata users and groups');
    if (!(await store.objects.setAcl(bucket, key, stored))) throw new S3Error('NoSuchKey', undefined, { Key: key });
    await invalidateObjectRead(cache, bucket.name, key);
    res.status(204).end();
  });
  router.delete('/buckets/:bucket/objects/:key', async (req, res) => {
    const { bucket, key } = await objectPath(req);
    await store.recycleBin.recycle(bucket, key, deps.clock(), deleteConditions(req.query));
    // The data plane's GET/HEAD cache (object-model/object-read-cache.ts), before answering.
    await invalidateObjectRead(cache, bucket.name, key);
    res.status(204).end();
  });
  // `objects`: [{key, ifMatch?, lastModifiedTime?, size?}] (conditional deletes); `keys`: plain keys.
  router.post('/buckets/:bucket/delete-objects', async (req, res) => {
    const bucket = await mustBucket(param(req, 'bucket'));
    const objects: unknown = req.body?.objects ?? (Array.isArray(req.body?.keys) ? (req.body.keys as unknown[]).map((key) => ({ key })) : undefined);
    if (!Array.isArray(objects) || objects.length > 1000) throw new S3Error('MalformedXML', 'objects must be a list of at most 1000 objects');
    // Each entry's outcome by its position in the request: deleted, or its error.
    const outcomes: Array<{ key: string; error?: { code: string; message: string } }> = [];
    const failed = (at: number, key: unknown, err: unknown) => {
      if (!(err instanceof S3Error)) throw err;
      outcomes[at] = { key: String(key), error: { code: err.code, message: err.message } };
    };
    // Plain keys go in one statement (one commit, not one per key); conditional ones one by one.
    const plain: string[] = [];
    const conditional: Array<{ at: number; key: string; conditions: DeleteConditions }> = [];
    (objects as unknown[]).forEach((object, at) => {
      const key = isObject(object) ? object.key : undefined;
      try {
        if (typeof key !== 'string') throw new S3Error('InvalidObjectName', 'keys must be strings');
        assertObjectKey(key);
        const conditions = deleteConditions(object as Record<string, unknown>);
        if (conditions) conditional.push({ at, key, conditions });
        else plain.push(key);
        outcomes[at] = { key };
      } catch (err) {
        failed(at, key, err);
      }
    });
    await store.recycleBin.recycleMany(bucket, plain, deps.clock());
    for (const { at, key, conditions } of conditional) {
      try {
        await store.recycleBin.recycle(bucket, key, deps.clock(), conditions);
      } catch (err) {
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
    const limit = str(req.query.limit) === undefined ? RECYCLE_BIN_PAGE : Number(req.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > RECYCLE_BIN_PAGE)
      throw new S3Error('InvalidArgument', `limit must be a whole number from 1 to ${RECYCLE_BIN_PAGE}`);
    const token = str(req.query.after);
    const after = token === undefined ? undefined : recycleBinCursor(token);
    const page = await store.recycleBin.list({ owner: str(req.query.owner), bucket: str(req.query.bucket), prefix: str(req.query.prefix), limit, after });
    res.json({ objects: page.objects, ...(page.next ? { nextToken: Buffer.from(JSON.stringify(page.next)).toString('base64url') } : {}) });
  });
  router.post('/recycle-bin/:id/restore', async (req, res) => {
    const id = Number(param(req, 'id'));
    if (!Number.isSafeInteger(id) || id <= 0) throw new S3Error('InvalidArgument', 'recycle-bin ids are positive integers');
    const meta = await store.recycleBin.restore(id, str(req.body?.owner), deps.clock());
    if (!meta) throw new S3Error('NoSuchKey', 'no such object in the recycle bin');
    await invalidateObjectRead(cache, meta.bucket, meta.key);
    res.json(meta);
  });
  // Long work answers 202 with its job at once; GET /jobs/:id tells how it went (admin-jobs.ts).
  router.post('/purge', async (req, res) => {
    const rawNow = str(req.body?.now);
    const now = rawNow ? new Date(rawNow) : deps.clock();
    if (Number.isNaN(now.getTime())) throw new S3Error('InvalidArgument', 'now must be an ISO 8601 time');
    const job = jobs.start('purge', () => deps.purge(now));
    res.status(202).location(`/internal/jobs/${job.id}`).json(job);
  });
  router.get('/jobs/:id', async (req, res) => {
    res.json(jobs.get(param(req, 'id')));
  });

  return router;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isStrings = (v: unknown) => Array.isArray(v) && v.every((e) => typeof e === 'string');

/** Per configuration: its error when absent, its most rules, and the outline each rule must have. */
const BUCKET_CONFIGS: Record<
  BucketConfigKind,
  {
    /** The answer when the bucket has none; without one, an empty list. */
    missing?:
      | 'NoSuchLifecycleConfiguration'
      | 'NoSuchCORSConfiguration'
      | 'NoSuchTagSet'
      | 'OwnershipControlsNotFoundError'
      | 'NoSuchPublicAccessBlockConfiguration'
      | 'ServerSideEncryptionConfigurationNotFoundError';
    max: number;
    outline: (rule: unknown) => boolean;
  }
> = {
  lifecycle: {
    missing: 'NoSuchLifecycleConfiguration',
    max: MAX_LIFECYCLE_RULES,
    outline: (r) =>
      isObject(r) &&
      typeof r.id === 'string' &&
      typeof r.enabled === 'boolean' &&
      isObject(r.filter) &&
      typeof r.filter.prefix === 'string' &&
      Array.isArray(r.filter.tags),
  },
  cors: {
    missing: 'NoSuchCORSConfiguration',
    max: MAX_CORS_RULES,
    outline: (r) => isObject(r) && isStrings(r.allowedOrigins) && isStrings(r.allowedMethods) && isStrings(r.allowedHeaders) && isStrings(r.exposeHeaders),
  },
  tags: {
    missing: 'NoSuchTagSet',
    max: MAX_BUCKET_TAGS,
    outline: (t) => isObject(t) && typeof t.key === 'string' && typeof t.value === 'string',
  },
  ownership: {
    missing: 'OwnershipControlsNotFoundError',
    max: 1,
    outline: (r) => isObject(r) && OBJECT_OWNERSHIPS.includes(r.objectOwnership as ObjectOwnership),
  },
  // A bucket without grants is private to its owner: no error, no grants.
  acl: {
    max: MAX_GRANTS + 2,
    outline: (g) =>
      isObject(g) &&
      PERMISSIONS.includes(g.permission as Permission) &&
      isObject(g.grantee) &&
      (typeof g.grantee.id === 'string' || typeof g.grantee.group === 'string'),
  },
  publicAccessBlock: {
    missing: 'NoSuchPublicAccessBlockConfiguration',
    max: 1,
    outline: (b) =>
      isObject(b) && ['blockPublicAcls', 'ignorePublicAcls', 'blockPublicPolicy', 'restrictPublicBuckets'].every((k) => typeof b[k] === 'boolean'),
  },
  encryption: {
    missing: 'ServerSideEncryptionConfigurationNotFoundError',
    max: 1,
    outline: (r) => isObject(r) && (r.algorithm === 'AES256' || r.algorithm === 'aws:kms') && (r.kmsKeyId === undefined || typeof r.kmsKeyId === 'string'),
  },
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
  };
}
