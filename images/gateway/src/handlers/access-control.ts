import type http from 'node:http';
import { requestedAcl, S3Error, type RequestedAcl, type ResolvedAcl } from '../../../object-model/src/index.js';
import { callerOf, state } from '../context.js';
import { aclsEnabled, aclToKeep, bucketAcl, objectAcl, objectAllows, resolveAcl } from '../middleware/access-policy.js';
import {
  parseAccessControlPolicy,
  parseOwnershipControls,
  parsePublicAccessBlock,
  renderAccessControlPolicy,
  renderOwnershipControls,
  renderPublicAccessBlock,
} from '../s3/acl-xml.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { discard, header, readCheckedDocument, readSmallBody } from '../s3/request.js';
import { sendStatus, sendXml } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';

/**
 * Get/PutBucketAcl, Get/PutObjectAcl, Put/Get/DeleteBucketOwnershipControls and Put/Get/DeletePublicAccessBlock.
 * An ACL is read by whoever holds READ_ACP on it and replaced by whoever holds WRITE_ACP (its owner always).
 */

const headerLookup = (req: http.IncomingMessage) => (name: string) => header(req, name);

/** The ACL a PutBucketAcl / PutObjectAcl asks for: an AccessControlPolicy body, or the headers (never both, as S3). */
async function aclRequest(s3: S3Request): Promise<ResolvedAcl> {
  const body = (await readSmallBody(s3.req, s3.res)).toString('utf8');
  const fromHeaders = requestedAcl(headerLookup(s3.req));
  let requested: RequestedAcl;
  if (body.trim()) {
    if (fromHeaders) throw new S3Error('UnexpectedContent', 'This request does not support content together with ACL headers.');
    requested = { grants: parseAccessControlPolicy(parseXml<Record<string, unknown>>(body, 'AccessControlPolicy')) };
  } else if (fromHeaders) {
    requested = fromHeaders;
  } else {
    throw new S3Error('MissingSecurityHeader', 'Your request was missing a required header: x-amz-acl, x-amz-grant-* or an AccessControlPolicy body.');
  }
  // Grants by e-mail address are kept as the users they name (or the ACL is refused, unchanged).
  return (await resolveAcl(requested, s3.deps.userByEmail))!;
}

export const getBucketAcl: S3Handler = async ({ res, bucket, deps }) => {
  const info = await deps.buckets.permitted(bucket, state(res).caller, 'READ_ACP');
  sendXml(res, 'AccessControlPolicy', renderAccessControlPolicy(bucketAcl(info)));
};

export const putBucketAcl: S3Handler = async (s3) => {
  const { res, bucket, deps } = s3;
  const info = await deps.buckets.permitted(bucket, state(res).caller, 'WRITE_ACP');
  const acl = aclToKeep(await aclRequest(s3), {
    bucket: info,
    writer: info.owner,
    kind: 'bucket',
    platformBlocksPublic: deps.buckets.platformBlocksPublic,
  });
  await deps.objects.putBucketConfig(bucket, 'acl', acl?.grants, info);
  deps.buckets.forget(bucket);
  sendStatus(res, 200);
};

/** The object and its bucket, if the caller holds `permission` on the object (NoSuchKey for its bucket's readers only). */
async function objectFor(s3: S3Request, permission: 'READ_ACP' | 'WRITE_ACP') {
  const { res, bucket, key, deps } = s3;
  const caller = state(res).caller?.username;
  const info = await deps.buckets.existing(bucket);
  if (caller !== info.owner && !aclsEnabled(info)) throw new S3Error('AccessDenied');
  const meta = await deps.objects.headObject(bucket, key, info).catch((err: unknown) => {
    // As S3: who may not list the bucket learns nothing of which keys exist.
    if (err instanceof S3Error && err.code === 'NoSuchKey' && caller !== info.owner) throw new S3Error('AccessDenied');
    throw err;
  });
  if (!objectAllows(info, meta.headers, caller, permission, deps.buckets.platformBlocksPublic)) throw new S3Error('AccessDenied');
  return { info, meta };
}

export const getObjectAcl: S3Handler = async (s3) => {
  const { info, meta } = await objectFor(s3, 'READ_ACP');
  sendXml(s3.res, 'AccessControlPolicy', renderAccessControlPolicy(objectAcl(info, meta.headers)));
};

export const putObjectAcl: S3Handler = async (s3) => {
  const { res, bucket, key, deps } = s3;
  const { info, meta } = await objectFor(s3, 'WRITE_ACP');
  const acl = aclToKeep(await aclRequest(s3), {
    bucket: info,
    writer: callerOf(res).username,
    owner: objectAcl(info, meta.headers).owner,
    kind: 'object',
    platformBlocksPublic: deps.buckets.platformBlocksPublic,
  });
  await deps.objects.putObjectAcl(bucket, key, acl, info);
  sendStatus(res, 200);
};

/** Put/Get/DeleteBucketOwnershipControls (the bucket owner's only). */
export const ownershipControls: Record<'put' | 'get' | 'delete', S3Handler> = {
  put: async ({ req, res, bucket, deps }) => {
    const body = await readCheckedDocument(req, res, { required: true });
    const info = await deps.buckets.owned(bucket, callerOf(res));
    const ownership = parseOwnershipControls(parseXml<Record<string, unknown>>(body.toString('utf8'), 'OwnershipControls'));
    // As S3: turning ACLs off is refused while the bucket's own ACL grants anyone else anything.
    if (ownership === 'BucketOwnerEnforced' && info.acl?.some((g) => !('id' in g.grantee && g.grantee.id === info.owner)))
      throw new S3Error('InvalidBucketAclWithObjectOwnership');
    await deps.objects.putBucketConfig(bucket, 'ownership', [{ objectOwnership: ownership }], info);
    deps.buckets.forget(bucket);
    sendStatus(res, 200);
  },
  get: async ({ res, bucket, deps }) => {
    const info = await deps.buckets.owned(bucket, callerOf(res));
    const [rule] = await deps.objects.getBucketConfig(bucket, 'ownership', info);
    sendXml(res, 'OwnershipControls', renderOwnershipControls(rule!.objectOwnership));
  },
  delete: async ({ req, res, bucket, deps }) => {
    discard(req);
    const info = await deps.buckets.owned(bucket, callerOf(res));
    await deps.objects.putBucketConfig(bucket, 'ownership', undefined, info);
    deps.buckets.forget(bucket);
    sendStatus(res, 204);
  },
};

/** Put/Get/DeletePublicAccessBlock (the bucket owner's only). */
export const publicAccessBlock: Record<'put' | 'get' | 'delete', S3Handler> = {
  put: async ({ req, res, bucket, deps }) => {
    const body = await readCheckedDocument(req, res, { required: false });
    const info = await deps.buckets.owned(bucket, callerOf(res));
    const block = parsePublicAccessBlock(parseXml<Record<string, unknown>>(body.toString('utf8'), 'PublicAccessBlockConfiguration'));
    await deps.objects.putBucketConfig(bucket, 'publicAccessBlock', [block], info);
    deps.buckets.forget(bucket);
    sendStatus(res, 200);
  },
  get: async ({ res, bucket, deps }) => {
    const info = await deps.buckets.owned(bucket, callerOf(res));
    const [block] = await deps.objects.getBucketConfig(bucket, 'publicAccessBlock', info);
    sendXml(res, 'PublicAccessBlockConfiguration', renderPublicAccessBlock(block!));
  },
  delete: async ({ req, res, bucket, deps }) => {
    discard(req);
    const info = await deps.buckets.owned(bucket, callerOf(res));
    await deps.objects.putBucketConfig(bucket, 'publicAccessBlock', undefined, info);
    deps.buckets.forget(bucket);
    sendStatus(res, 204);
  },
};
