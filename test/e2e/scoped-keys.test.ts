import {
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketAclCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutBucketAclCommand,
  PutBucketOwnershipControlsCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { eventually } from '../support/eventually.js';
import { JWT_SECRET, ROOT_USER } from './support/platform.js';
import { bearer, bodyText, bucketName, createTenant, describeWithBucket, login, s3ErrorOf, s3Failure, sdkClient, type Tenant } from './support/s3.js';

interface ScopedKey {
  accessKey: string;
  secretKey: string;
  parent: string;
}

/** POST /admin/access-keys as the holder of `token`: its status and JSON answer. */
async function makeKey(endpoint: string, token: string, body: unknown): Promise<{ status: number; json: { data?: ScopedKey; error?: { code: string } } }> {
  const r = await fetch(`${endpoint}/admin/access-keys`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as { data?: ScopedKey; error?: { code: string } } };
}

const denied = { name: 'AccessDenied', status: 403 };

// A scoped access key (issue 38 item 10): read-only, limited to named buckets and a prefix, as MinIO's
// service accounts with a policy. What an index worker is given instead of the root keys.
describeWithBucket('e2e: scoped read-only access keys', 'scoped', (env, bucket) => {
  let other: string;
  let key: ScopedKey;
  let reader: S3Client;
  let bob: Tenant;

  before(async () => {
    other = bucketName('scoped-other');
    await env.s3.send(new CreateBucketCommand({ Bucket: other }));
    for (const [b, k] of [
      [bucket, 'photos/a.jpg'],
      [bucket, 'photos/b.jpg'],
      [bucket, 'secret/plans.txt'],
      [other, 'photos/a.jpg'],
    ] as const)
      await env.s3.send(new PutObjectCommand({ Bucket: b, Key: k, Body: `${b}/${k}` }));
    const made = await makeKey(env.p.endpoint, env.token, { buckets: [bucket], prefix: 'photos/' });
    expect(made.status, JSON.stringify(made.json)).to.equal(201);
    key = made.json.data!;
    expect(key.parent).to.equal(ROOT_USER);
    reader = sdkClient(env.p.endpoint, key.accessKey, key.secretKey);
    bob = await createTenant(env.p.endpoint, 'scoped-bob');
  });
  after(() => {
    reader?.destroy();
    bob?.s3.destroy();
  });

  it('lists and reads its bucket under its prefix: ListObjectsV2, GET, HEAD, the ACL and tag reads, HeadBucket', async () => {
    const listed = await reader.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'photos/' }));
    expect(listed.Contents?.map((o) => o.Key)).to.deep.equal(['photos/a.jpg', 'photos/b.jpg']);
    expect(await bodyText(await reader.send(new GetObjectCommand({ Bucket: bucket, Key: 'photos/a.jpg' })))).to.equal(`${bucket}/photos/a.jpg`);
    expect((await reader.send(new HeadObjectCommand({ Bucket: bucket, Key: 'photos/b.jpg' }))).ContentLength).to.equal(`${bucket}/photos/b.jpg`.length);
    expect((await reader.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'photos/a.jpg' }))).Owner?.ID).to.equal(ROOT_USER);
    expect((await reader.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: 'photos/a.jpg' }))).TagSet).to.deep.equal([]);
    expect((await reader.send(new GetBucketAclCommand({ Bucket: bucket }))).Owner?.ID).to.equal(ROOT_USER);
    await reader.send(new HeadBucketCommand({ Bucket: bucket }));
  });

  it('sees only its buckets in ListBuckets, owned by its parent (image search learns the source owner there)', async () => {
    const all = await reader.send(new ListBucketsCommand({}));
    expect(all.Buckets?.map((b) => b.Name)).to.deep.equal([bucket]);
    expect(all.Owner?.ID).to.equal(ROOT_USER);
  });

  it('is refused (403 AccessDenied) every write: PUT, DELETE, DeleteObjects, copy, multipart, tagging, ACL writes, ownership controls', async () => {
    const refused: Record<string, () => Promise<unknown>> = {
      put: () => reader.send(new PutObjectCommand({ Bucket: bucket, Key: 'photos/new.jpg', Body: 'x' })),
      delete: () => reader.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'photos/a.jpg' })),
      deleteObjects: () => reader.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'photos/a.jpg' }] } })),
      copy: () => reader.send(new CopyObjectCommand({ Bucket: bucket, Key: 'photos/copy.jpg', CopySource: `${bucket}/photos/a.jpg` })),
      multipart: () => reader.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'photos/big.jpg' })),
      tagging: () => reader.send(new PutObjectTaggingCommand({ Bucket: bucket, Key: 'photos/a.jpg', Tagging: { TagSet: [{ Key: 'k', Value: 'v' }] } })),
      objectAcl: () => reader.send(new PutObjectAclCommand({ Bucket: bucket, Key: 'photos/a.jpg', ACL: 'public-read' })),
      bucketAcl: () => reader.send(new PutBucketAclCommand({ Bucket: bucket, ACL: 'public-read' })),
      ownership: () =>
        reader.send(new PutBucketOwnershipControlsCommand({ Bucket: bucket, OwnershipControls: { Rules: [{ ObjectOwnership: 'ObjectWriter' }] } })),
    };
    for (const [what, call] of Object.entries(refused)) expect(await s3Failure(call()), what).to.deep.equal(denied);
    // Nothing changed.
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'photos/a.jpg' })))).to.equal(`${bucket}/photos/a.jpg`);
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'photos/new.jpg' })))).status).to.equal(404);
  });

  it('is refused bucket create and delete, other buckets, other prefixes and listings outside its prefix', async () => {
    const refused: Record<string, () => Promise<unknown>> = {
      createBucket: () => reader.send(new CreateBucketCommand({ Bucket: bucketName('scoped-new') })),
      deleteBucket: () => reader.send(new DeleteBucketCommand({ Bucket: bucket })),
      otherBucketGet: () => reader.send(new GetObjectCommand({ Bucket: other, Key: 'photos/a.jpg' })),
      otherBucketList: () => reader.send(new ListObjectsV2Command({ Bucket: other, Prefix: 'photos/' })),
      otherBucketHead: () => reader.send(new HeadBucketCommand({ Bucket: other })),
      otherPrefixGet: () => reader.send(new GetObjectCommand({ Bucket: bucket, Key: 'secret/plans.txt' })),
      otherPrefixHead: () => reader.send(new HeadObjectCommand({ Bucket: bucket, Key: 'secret/plans.txt' })),
      otherPrefixAcl: () => reader.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'secret/plans.txt' })),
      wholeBucketList: () => reader.send(new ListObjectsV2Command({ Bucket: bucket })),
      otherPrefixList: () => reader.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'secret/' })),
    };
    for (const [what, call] of Object.entries(refused)) expect((await s3Failure(call())).status, what).to.equal(403);
    // (HEAD answers carry no body: the code is checked on the GETs.)
    for (const what of ['createBucket', 'deleteBucket', 'otherBucketGet', 'otherBucketList', 'otherPrefixGet', 'otherPrefixAcl', 'wholeBucketList'])
      expect(await s3Failure(refused[what]!()), what).to.deep.equal(denied);
  });

  it('signs presigned URLs and browser forms that read, never write', async () => {
    const url = (method: string, path: string) =>
      presignUrl({ method, origin: env.p.endpoint, path, accessKey: key.accessKey, secret: key.secretKey, region: 'us-east-1', expiresSeconds: 60 });
    expect(await (await fetch(url('GET', `/${bucket}/photos/a.jpg`))).text()).to.equal(`${bucket}/photos/a.jpg`);
    const put = await fetch(url('PUT', `/${bucket}/photos/a.jpg`), { method: 'PUT', body: 'overwritten' });
    expect([put.status, s3ErrorOf(await put.text()).code]).to.deep.equal([403, 'AccessDenied']);
    const post = await createPresignedPost(reader, { Bucket: bucket, Key: 'photos/form.jpg', Expires: 60 });
    const form = new FormData();
    for (const [k, v] of Object.entries(post.fields)) form.append(k, v);
    form.append('file', new Blob(['form bytes']), 'form.jpg');
    const posted = await fetch(post.url, { method: 'POST', body: form });
    expect([posted.status, s3ErrorOf(await posted.text()).code]).to.deep.equal([403, 'AccessDenied']);
  });

  it('administers nothing, although its parent is the root: /admin answers AccessDenied', async () => {
    // A bearer token naming the key (as /login would issue one for it) carries the key's scope too.
    const token = jwt.sign({ sub: ROOT_USER, ak: key.accessKey }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 60 });
    const users = await fetch(`${env.p.endpoint}/admin/users`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'scoped-mallory', password: 'mallory-password-1' }),
    });
    expect(users.status).to.equal(403);
    expect((await makeKey(env.p.endpoint, token, { buckets: [other] })).status).to.equal(403);
    const write = await fetch(`${env.p.endpoint}/${bucket}/photos/by-token.jpg`, { method: 'PUT', headers: bearer(token), body: 'x' });
    expect(write.status).to.equal(403);
  });

  it('is made only for buckets its user may read; a user makes keys of its own, and only the root names another user', async () => {
    const bobToken = await login(env.p.endpoint, 'scoped-bob', bob.password);
    expect((await makeKey(env.p.endpoint, bobToken, { buckets: [bucket] })).status).to.equal(403);
    expect((await makeKey(env.p.endpoint, bobToken, { buckets: [bucket], user: ROOT_USER })).status).to.equal(403);
    expect((await makeKey(env.p.endpoint, env.token, { buckets: [bucket], user: 'scoped-bob' })).status).to.equal(403);
    expect((await makeKey(env.p.endpoint, env.token, { buckets: [] })).status).to.equal(400);
    const own = bucketName('scoped-bobs');
    await bob.s3.send(new CreateBucketCommand({ Bucket: own }));
    await bob.s3.send(new PutObjectCommand({ Bucket: own, Key: 'x.txt', Body: 'bob' }));
    const made = await makeKey(env.p.endpoint, bobToken, { buckets: [own] });
    expect(made.status).to.equal(201);
    const bobReader = sdkClient(env.p.endpoint, made.json.data!.accessKey, made.json.data!.secretKey);
    try {
      expect(await bodyText(await bobReader.send(new GetObjectCommand({ Bucket: own, Key: 'x.txt' })))).to.equal('bob');
      // Its scope names no prefix: the whole bucket lists.
      expect((await bobReader.send(new ListObjectsV2Command({ Bucket: own }))).KeyCount).to.equal(1);
      expect(await s3Failure(bobReader.send(new GetObjectCommand({ Bucket: bucket, Key: 'photos/a.jpg' })))).to.deep.equal(denied);
    } finally {
      bobReader.destroy();
    }
  });

  it('stops working once deleted (DELETE /admin/access-keys/:key, by its parent)', async () => {
    const made = await makeKey(env.p.endpoint, env.token, { resources: [{ bucket, prefix: 'photos/' }] });
    const doomed = sdkClient(env.p.endpoint, made.json.data!.accessKey, made.json.data!.secretKey);
    try {
      await doomed.send(new HeadObjectCommand({ Bucket: bucket, Key: 'photos/a.jpg' }));
      const listed = await fetch(`${env.p.endpoint}/admin/access-keys`, { headers: bearer(env.token) });
      const keys = ((await listed.json()) as { data: { keys: Array<{ accessKey: string; secretKey?: string }> } }).data.keys;
      expect(keys.map((k) => k.accessKey)).to.include(made.json.data!.accessKey);
      expect(keys.every((k) => k.secretKey === undefined)).to.equal(true);
      const del = await fetch(`${env.p.endpoint}/admin/access-keys/${made.json.data!.accessKey}`, { method: 'DELETE', headers: bearer(env.token) });
      expect(del.status).to.equal(204);
      // Gateways forget cached credentials after a few seconds (HEAD: no answer body left unread meanwhile).
      await eventually(async () => expect((await s3Failure(doomed.send(new HeadObjectCommand({ Bucket: bucket, Key: 'photos/a.jpg' })))).status).to.equal(403));
    } finally {
      doomed.destroy();
    }
  });
});
