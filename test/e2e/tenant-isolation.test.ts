import {
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { filesUnder } from '../support/temp-dir.js';
import { bearer, bodyBytes, bodyText, describeWithBucket, md5Hex, newBucket, rootPresign, s3ErrorOf, s3Failure, sdkClient, tenantHooks } from './support/s3.js';
import { adminPurge } from '../support/admin-jobs.js';

const DAY = 24 * 3600_000;

/**
 * What one tenant can do to another's data: instant upload across tenants, the recycle bin, and purge
 * freeing bytes only when unreferenced, every S3 path, and the users API.
 */
describeWithBucket('e2e: tenants on one platform (instant upload, recycle bin, isolation, users)', 'details', (env, bucket) => {
  const bob = tenantHooks(env, 'bob');
  const blobFiles = async () => (await filesUnder(path.join(env.p.dataDir, 'blobs'))).filter((f) => !f.startsWith('parts') && !f.endsWith('.tmp'));

  it('instant upload never hits on another tenant’s blob: the body is read and checked instead', async () => {
    const content = randomBytes(64 * 1024);
    const md5 = md5Hex(content);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'instant/root.bin', Body: content }));
    const bobBucket = await newBucket(bob.s3, 'bob-instant');
    const bobPut = (key: string, body: Buffer) =>
      fetch(`${env.p.endpoint}/${bobBucket}/${key}`, {
        method: 'PUT',
        headers: { ...bearer(bob.token), 'x-service-md5': md5 },
        body: body as unknown as BodyInit,
      });

    // Knowing root's MD5 gets bob nothing: a body of the same size but other bytes is BadDigest.
    const claim = await bobPut('claimed.bin', Buffer.alloc(content.length));
    expect(claim.status).to.equal(400);
    expect(s3ErrorOf(await claim.text()).code).to.equal('BadDigest');
    expect((await s3Failure(bob.s3.send(new HeadObjectCommand({ Bucket: bobBucket, Key: 'claimed.bin' })))).status).to.equal(404);
    // Bob's first upload of the real bytes is a miss (read and hashed), his second one a hit.
    const first = await bobPut('first.bin', content);
    expect(((await first.json()) as { data: { instant: boolean } }).data.instant).to.equal(false);
    const second = await bobPut('second.bin', content);
    expect(((await second.json()) as { data: { instant: boolean } }).data.instant).to.equal(true);
    const back = await bob.s3.send(new GetObjectCommand({ Bucket: bobBucket, Key: 'second.bin' }));
    expect(Buffer.from(await back.Body!.transformToByteArray()).equals(content)).to.equal(true);
  });

  it('recycle bin: delete hides from GET and LIST, restore brings back; purge frees bytes only when no object references them', async () => {
    const b = await newBucket(env.s3, 'recycle');
    // Above the 64 KiB kept inline in the database: the bytes are a file, and its removal is checked.
    const content = randomBytes(96 * 1024);
    const before = await blobFiles();
    await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'one.bin', Body: content }));
    const added = (await blobFiles()).filter((f) => !before.includes(f));
    expect(added).to.have.length(1);
    // Same bytes again: stored once (server-side dedupe), two objects share the blob.
    await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'two.bin', Body: content }));
    expect((await blobFiles()).filter((f) => !before.includes(f))).to.deep.equal(added);

    await env.s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'one.bin' }));
    expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'one.bin' })))).name).to.equal('NoSuchKey');
    expect(((await env.s3.send(new ListObjectsV2Command({ Bucket: b }))).Contents ?? []).map((o) => o.Key)).to.deep.equal(['two.bin']);
    const binOf = async () =>
      (
        (await (await fetch(`${env.p.endpoint}/admin/recycle-bin?bucket=${b}`, { headers: bearer(env.token) })).json()) as {
          data: { objects: Array<{ id: string; key: string; size: number }> };
        }
      ).data.objects;
    const bin = await binOf();
    expect(bin.map((o) => [o.key, o.size])).to.deep.equal([['one.bin', content.length]]);
    // Another tenant can neither see this bin nor restore from it.
    expect((await fetch(`${env.p.endpoint}/admin/recycle-bin?bucket=${b}`, { headers: bearer(bob.token) })).status).to.equal(403);
    expect((await fetch(`${env.p.endpoint}/admin/recycle-bin/${bin[0].id}/restore`, { method: 'POST', headers: bearer(bob.token) })).status).to.equal(404);
    const restored = await fetch(`${env.p.endpoint}/admin/recycle-bin/${bin[0].id}/restore`, { method: 'POST', headers: bearer(env.token) });
    expect(restored.status).to.equal(200);
    expect((await env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'one.bin' }))).ContentLength).to.equal(content.length);
    expect(await binOf()).to.deep.equal([]);

    const purge = async (days: number) => adminPurge(env.p.endpoint, bearer(env.token), { now: new Date(Date.now() + days * DAY).toISOString() });
    await env.s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'one.bin' }));
    expect((await purge(29)).purged, 'younger than 30 days: kept').to.equal(0);
    expect(await binOf()).to.have.length(1);
    expect((await purge(31)).purged).to.be.at.least(1);
    expect(await binOf()).to.deep.equal([]);
    expect(
      (await blobFiles()).filter((f) => !before.includes(f)),
      'two.bin still references the bytes',
    ).to.deep.equal(added);
    // (The body is read: the SDK checks it against the stored checksum, and an abandoned one errors when the platform stops.)
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'two.bin' })))).equals(content)).to.equal(true);

    await env.s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'two.bin' }));
    const last = await purge(31);
    expect(last.purged).to.be.at.least(1);
    expect(last.freedBlobs).to.be.at.least(1);
    expect(
      (await blobFiles()).filter((f) => !before.includes(f)),
      'bytes freed',
    ).to.deep.equal([]);
    await env.s3.send(new DeleteBucketCommand({ Bucket: b }));
  });

  it('tenant isolation on every path: objects, copies, deletes, multipart, ACLs and the bucket itself', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'private.txt', Body: 'root only' }));
    const bobBucket = await newBucket(bob.s3, 'bob-own');
    const denied = async (name: string, call: Promise<unknown>) => expect((await s3Failure(call)).name, name).to.equal('AccessDenied');
    // HEAD answers carry no body: the status says it.
    expect((await s3Failure(bob.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'private.txt' })))).status).to.equal(403);
    await denied('DeleteObject', bob.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'private.txt' })));
    await denied('DeleteObjects', bob.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'private.txt' }] } })));
    await denied('CopyObject from root', bob.s3.send(new CopyObjectCommand({ Bucket: bobBucket, Key: 'stolen.txt', CopySource: `${bucket}/private.txt` })));
    await denied('CopyObject into root', bob.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'planted.txt', CopySource: `${bobBucket}/x` })));
    await denied('CreateMultipartUpload', bob.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mp.bin' })));
    await denied('ListMultipartUploads', bob.s3.send(new ListMultipartUploadsCommand({ Bucket: bucket })));
    await denied('GetObjectAcl', bob.s3.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'private.txt' })));
    await denied('DeleteBucket', bob.s3.send(new DeleteBucketCommand({ Bucket: bucket })));
    const viaProxy = await fetch(`${env.p.endpoint}/${bucket}/private.txt?proxy=true`, { headers: bearer(bob.token) });
    expect(viaProxy.status).to.equal(403);
    const viaRedirect = await fetch(`${env.p.endpoint}/${bucket}/private.txt`, { headers: bearer(bob.token), redirect: 'manual' });
    expect(viaRedirect.status).to.equal(403);
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'private.txt' })))).to.equal('root only');
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bobBucket, Key: 'stolen.txt' })))).status).to.equal(403);
    expect((await bob.s3.send(new ListObjectsV2Command({ Bucket: bobBucket }))).KeyCount).to.equal(0);
    // Non-root users cannot create users.
    const eve = await fetch(`${env.p.endpoint}/admin/users`, {
      method: 'POST',
      headers: { ...bearer(bob.token), 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'eve', password: 'eve-password-1' }),
    });
    expect(eve.status).to.equal(403);
  });

  it('POST /admin/users: a taken name and bad bodies are clear JSON errors; the new user signs with the keys answered', async () => {
    const post = (body: string, headers: Record<string, string> = bearer(env.token)) =>
      fetch(`${env.p.endpoint}/admin/users`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
    const taken = await post(JSON.stringify({ username: 'bob', password: 'another-password' }));
    expect(taken.status).to.be.within(400, 409);
    expect(((await taken.json()) as { error: { code: string } }).error.code).to.be.a('string');
    for (const bad of ['{"username":"x"}', '{"username":"","password":"p"}', '[]', '{not json']) {
      const r = await post(bad);
      expect(r.status, bad).to.equal(400);
      expect(((await r.json()) as { error: { code: string } }).error.code, bad).to.be.oneOf(['InvalidArgument', 'MalformedJSON']);
    }
    expect((await post(JSON.stringify({ username: 'x2', password: 'pw-123456' }), {})).status).to.equal(403);
    // The same call signed with SigV4 (root's access key = root user name).
    const signed = await fetch(rootPresign(env.p.endpoint, 'POST', '/admin/users'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'dave', password: 'dave-password-1' }),
    });
    expect(signed.status).to.equal(201);
    const dave = ((await signed.json()) as { data: { username: string; accessKey: string; secretKey: string } }).data;
    expect(dave.username).to.equal('dave');
    expect(dave.accessKey).to.be.a('string').and.not.equal(dave.secretKey);
    const daveS3 = sdkClient(env.p.endpoint, dave.accessKey, dave.secretKey);
    await newBucket(daveS3, 'dave');
    daveS3.destroy();
  });
});
