import type http from 'node:http';
import {
  assertBucketName,
  isValidBucketName,
  MAX_BUCKETS_PAGE,
  OBJECT_OWNERSHIPS,
  requestedAcl,
  S3Error,
  type BackendRef,
  type BucketInfo,
  type ListBucketsQuery,
  type NewBucketAccess,
  type ObjectOwnership,
} from '../../../object-model/src/index.js';
import { aclContext, aclToKeep, resolveAcl, type AclContext } from '../middleware/access-policy.js';
import { callerOf, state } from '../context.js';
import { RESERVED_BUCKET_NAMES } from '../middleware/bucket-access.js';
import type { S3Handler } from '../s3/operation.js';
import { header, readSmallBody } from '../s3/request.js';
import { callerOwner, sendXml, sendStatus } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';

/**
 * GET / — the caller's own buckets only (a scoped key's: those of them it names), by name; with S3's paging parameters (`max-buckets`,
 * `continuation-token`: the last name of the page before, opaque to clients), `prefix`, and
 * `bucket-region` (every bucket is in the gateway's region). The control plane pages (keyset on the name); one more
 * bucket than the page tells whether another follows.
 */
export const listBuckets: S3Handler = async ({ res, query, deps }) => {
  const caller = callerOf(res);
  const rawMax = query.get('max-buckets');
  if (rawMax !== null && !(/^\d+$/.test(rawMax) && Number(rawMax) >= 1 && Number(rawMax) <= MAX_BUCKETS_PAGE)) {
    throw new S3Error('InvalidArgument', `max-buckets must be a whole number from 1 to ${MAX_BUCKETS_PAGE}.`, { ArgumentName: 'max-buckets' });
  }
  const token = query.get('continuation-token');
  const after = token === null ? undefined : Buffer.from(token, 'base64url').toString('utf8');
  if (after !== undefined && (!isValidBucketName(after) || Buffer.from(after).toString('base64url') !== token)) {
    throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect.', { ArgumentName: 'continuation-token' });
  }
  const prefix = query.get('prefix') ?? '';
  const region = query.get('bucket-region');
  const max = rawMax === null ? undefined : Number(rawMax);
  const ask: ListBucketsQuery = { prefix };
  if (after !== undefined) ask.after = after;
  if (max !== undefined) ask.limit = max + 1;
  if (caller.scope) ask.names = [...new Set(caller.scope.resources.map((r) => r.bucket))];
  const found = region !== null && region !== deps.region ? [] : await deps.objects.listBuckets(caller.username, ask);
  const page = max === undefined ? found : found.slice(0, max);
  const more = page.length < found.length;
  sendXml(res, 'ListAllMyBucketsResult', {
    Owner: callerOwner(caller),
    Buckets: { Bucket: page.map((b) => ({ Name: b.name, CreationDate: new Date(b.createdAt).toISOString(), BucketRegion: deps.region })) },
    ...(more ? { ContinuationToken: Buffer.from(page[page.length - 1]!.name).toString('base64url') } : {}),
    ...(query.has('prefix') ? { Prefix: prefix } : {}),
  });
};

const BACKEND_KINDS = new Set(['fs', 'minio', 'cloud']);

/**
 * Which backend a new bucket uses: header `x-strata-backend: fs|minio|cloud`, or a JSON body
 * `{"backend":"minio"}` / `{"backend":{"kind":"minio"}}`, or `<CreateBucketConfiguration><Backend>..</Backend>`
 * (where S3 clients may send a LocationConstraint: locationConstraint() checks it). Default fs. Clients
 * pick the kind only: endpoints and credentials are the server's configuration (a client-chosen
 * endpoint would let anyone make the data plane call any host).
 */
function backendChoice(headerValue: string | undefined, body: Buffer, contentType: string | undefined, region: string): BackendRef | undefined {
  let backend: BackendRef | undefined;
  const text = body.toString('utf8').trim();
  if (text) {
    if (contentType?.includes('json') || text.startsWith('{')) {
      let parsed: { backend?: BackendRef | string };
      try {
        parsed = JSON.parse(text) as { backend?: BackendRef | string };
      } catch {
        throw new S3Error('InvalidArgument', 'The bucket configuration is not valid JSON.');
      }
      backend = typeof parsed.backend === 'string' ? { kind: parsed.backend } : parsed.backend;
      if (backend !== undefined && (typeof backend !== 'object' || backend === null || Object.keys(backend).some((k) => k !== 'kind'))) {
        throw new S3Error(
          'InvalidArgument',
          'backend must be a kind ("fs", "minio" or "cloud") or {"kind": ...}; its settings come from the server configuration.',
          { ArgumentName: 'backend' },
        );
      }
    } else {
      const conf = parseXml<{ LocationConstraint?: string; Backend?: string }>(text, 'CreateBucketConfiguration');
      checkLocationConstraint(conf.LocationConstraint, region);
      if (conf.Backend) backend = { kind: conf.Backend };
    }
  }
  if (headerValue) backend = { kind: headerValue.trim() };
  if (backend && !BACKEND_KINDS.has(backend.kind))
    throw new S3Error('InvalidArgument', `Unknown backend "${backend.kind}": use fs, minio or cloud.`, { ArgumentName: 'x-strata-backend' });
  return backend;
}

/**
 * A CreateBucket's LocationConstraint, as S3 answers it at an endpoint of the gateway's region (STRATA_REGION): in
 * us-east-1 none is valid (naming us-east-1 is InvalidLocationConstraint); elsewhere only that region. Another
 * region does not fit the endpoint. An empty or absent one says nothing (the bucket is in the gateway's region).
 */
function checkLocationConstraint(constraint: string | undefined, region: string): void {
  if (!constraint || (constraint === region && region !== 'us-east-1')) return;
  if (constraint === 'us-east-1') throw new S3Error('InvalidLocationConstraint');
  throw new S3Error(
    'IllegalLocationConstraintException',
    `The ${constraint} location constraint is incompatible for the region specific endpoint this request was sent to (Strata serves ${region}).`,
  );
}

/**
 * A new bucket's ownership controls (`x-amz-object-ownership`, else the platform's default: BucketOwnerEnforced
 * as S3 unless STRATA_DEFAULT_OBJECT_OWNERSHIP says otherwise) and ACL (x-amz-acl, x-amz-grant-*), checked before
 * anything is created: an ACL on a bucket with ACLs off is InvalidBucketAclWithObjectOwnership, a public one under
 * a public access block AccessDenied.
 */
async function accessOfNewBucket(req: http.IncomingMessage, owner: string, context: AclContext, defaultOwnership: ObjectOwnership) {
  const raw = header(req, 'x-amz-object-ownership');
  if (raw !== undefined && !OBJECT_OWNERSHIPS.includes(raw as ObjectOwnership))
    throw new S3Error('InvalidArgument', `x-amz-object-ownership must be one of ${OBJECT_OWNERSHIPS.join(', ')}.`, { ArgumentName: 'x-amz-object-ownership' });
  const ownership = (raw ?? defaultOwnership) as ObjectOwnership;
  const requested = await resolveAcl(
    requestedAcl((name) => header(req, name)),
    context.userByEmail,
  );
  const draft: BucketInfo = { name: '', owner, createdAt: '', backend: { kind: 'fs' }, ownership: [{ objectOwnership: ownership }] };
  let acl;
  try {
    acl = aclToKeep(requested, { bucket: draft, writer: owner, kind: 'bucket', platformBlocksPublic: context.platformBlocksPublic });
  } catch (err) {
    throw err instanceof S3Error && err.code === 'AccessControlListNotSupported' ? new S3Error('InvalidBucketAclWithObjectOwnership') : err;
  }
  return { ownership, grants: acl?.grants };
}

export const createBucket: S3Handler = async ({ req, res, bucket, deps }) => {
  const caller = callerOf(res);
  const body = await readSmallBody(req, res);
  assertBucketName(bucket);
  if (RESERVED_BUCKET_NAMES.has(bucket)) throw new S3Error('InvalidBucketName', `${bucket} is reserved for the gateway's own routes`, { BucketName: bucket });
  const backend = backendChoice(req.headers['x-strata-backend'] as string | undefined, body, req.headers['content-type'], deps.region);
  const access = await accessOfNewBucket(req, caller.username, aclContext(deps), deps.defaultObjectOwnership);
  // The control plane asks the data plane whether a non-fs backend is usable before it creates the bucket.
  // The bucket is made with its ownership and ACL in one call: none that a failure or a retry could leave out.
  // (The control plane makes a bucket BucketOwnerEnforced with no grants: only other choices are sent.)
  const newAccess: NewBucketAccess = {
    ...(access.ownership !== 'BucketOwnerEnforced' ? { ownership: [{ objectOwnership: access.ownership }] } : {}),
    ...(access.grants ? { acl: access.grants } : {}),
  };
  try {
    await deps.objects.createBucket(bucket, caller.username, backend, newAccess);
  } catch (err) {
    if (!(err instanceof S3Error && err.code === 'BucketAlreadyOwnedByYou' && deps.region === 'us-east-1')) throw err;
    // S3 in us-east-1 answers a create of a bucket the caller already owns with success and, for legacy
    // compatibility, resets its ACL: to the one this request gives, else private. Nothing else changes.
    deps.buckets.forget(bucket);
    await deps.objects.putBucketConfig(bucket, 'acl', access.grants, await deps.buckets.owned(bucket, caller));
  }
  deps.buckets.forget(bucket);
  res.setHeader('Location', `/${bucket}`);
  sendStatus(res, 200);
};

export const deleteBucket: S3Handler = async ({ res, bucket, deps }) => {
  const record = await deps.buckets.owned(bucket, callerOf(res));
  await deps.objects.deleteBucket(bucket, record);
  deps.buckets.forget(bucket);
  sendStatus(res, 204);
};

/** HeadBucket: as S3, who may list the bucket (s3:ListBucket: its owner, or a READ grant) may ask whether it is there. */
export const headBucket: S3Handler = async ({ res, bucket, deps }) => {
  await deps.buckets.permitted(bucket, state(res).caller, 'READ');
  res.setHeader('x-amz-bucket-region', deps.region);
  sendStatus(res, 200);
};

export const getBucketLocation: S3Handler = async ({ res, bucket, deps }) => {
  await deps.buckets.owned(bucket, callerOf(res));
  // Every bucket is in the gateway's region; us-east-1 is written as an empty LocationConstraint, as S3 does.
  sendXml(res, 'LocationConstraint', deps.region === 'us-east-1' ? {} : { '#text': deps.region });
};

/** Versioning was never enabled: an empty configuration. */
export const getBucketVersioning: S3Handler = async ({ res, bucket, deps }) => {
  await deps.buckets.owned(bucket, callerOf(res));
  sendXml(res, 'VersioningConfiguration', {});
};
