import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { ROOT_PASSWORD } from './support/platform.js';
import { bucketName, describeWithBucket, login, md5Hex, sdkClient } from './support/s3.js';
import { adminPurge } from '../support/admin-jobs.js';

describeWithBucket('e2e: Bearer (JWT) clients, instant upload, redirects and the admin API', 'bearer', (env, bucket) => {
  const auth = () => ({ authorization: `Bearer ${env.token}` });

  it('login answers a token; bad JSON, missing fields and a wrong password get clear JSON errors', async () => {
    expect(env.token.split('.')).to.have.length(3);
    const bad = await fetch(`${env.p.endpoint}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(bad.status).to.equal(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).to.equal('InvalidArgument');
    const missing = await fetch(`${env.p.endpoint}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":"strata"}' });
    expect(missing.status).to.equal(400);
    const wrong = await fetch(`${env.p.endpoint}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'strata', password: 'nope' }),
    });
    expect(wrong.status).to.equal(401);
    const body = (await wrong.json()) as { error: { code: string; message: string } };
    expect(body.error.code).to.equal('AccessDenied');
    expect(body.error.message).to.match(/invalid username or password/i);
  });

  it('instant upload: a miss stores the body, a hit answers {"instant":true} without storing it again', async () => {
    const content = randomBytes(256 * 1024);
    const md5 = md5Hex(content);
    const miss = await fetch(`${env.p.endpoint}/${bucket}/instant/first.bin`, { method: 'PUT', headers: { ...auth(), 'x-service-md5': md5 }, body: content });
    expect(miss.status).to.equal(200);
    expect(miss.headers.get('etag')).to.equal(`"${md5}"`);
    expect(((await miss.json()) as { data: { instant: boolean; etag: string } }).data).to.include({ instant: false, etag: md5 });

    const hit = await fetch(`${env.p.endpoint}/${bucket}/instant/second.bin`, { method: 'PUT', headers: { ...auth(), 'x-service-md5': md5 }, body: content });
    expect(hit.status).to.equal(200);
    expect(((await hit.json()) as { data: { instant: boolean } }).data.instant).to.equal(true);
    const back = await fetch(`${env.p.endpoint}/${bucket}/instant/second.bin?proxy=true`, { headers: auth() });
    expect(Buffer.from(await back.arrayBuffer()).equals(content)).to.equal(true);

    // A claimed MD5 that the body does not have is refused (BadDigest) and nothing is stored.
    const other = Buffer.from('different bytes');
    const claimed = await fetch(`${env.p.endpoint}/${bucket}/instant/third.bin`, {
      method: 'PUT',
      headers: { ...auth(), 'x-service-md5': md5Hex('something else') },
      body: other,
    });
    expect(claimed.status).to.equal(400);
    expect(await claimed.text()).to.contain('<Code>BadDigest</Code>');
    expect((await fetch(`${env.p.endpoint}/${bucket}/instant/third.bin`, { method: 'HEAD', headers: auth() })).status).to.equal(404);
    const bad = await fetch(`${env.p.endpoint}/${bucket}/instant/bad.bin`, { method: 'PUT', headers: { ...auth(), 'x-service-md5': 'xyz' }, body: 'x' });
    expect(bad.status).to.equal(400);
  });

  it('GET redirects (302) to a working presigned URL; proxy=true streams through; HEAD answers headers', async () => {
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'dir/a file.txt', Body: 'redirected bytes', ContentType: 'text/plain' }));
    const r = await fetch(`${env.p.endpoint}/${bucket}/dir/a%20file.txt`, { headers: auth(), redirect: 'manual' });
    expect(r.status).to.equal(302);
    const location = r.headers.get('location')!;
    expect(location).to.contain('X-Amz-Signature=');
    const plain = await fetch(location);
    expect(plain.status).to.equal(200);
    expect(await plain.text()).to.equal('redirected bytes');
    const followed = await fetch(`${env.p.endpoint}/${bucket}/dir/a%20file.txt`, { headers: auth() });
    expect(followed.status).to.equal(200);
    expect(await followed.text()).to.equal('redirected bytes');
    const proxied = await fetch(`${env.p.endpoint}/${bucket}/dir/a%20file.txt?proxy=true`, { headers: auth(), redirect: 'manual' });
    expect(proxied.status).to.equal(200);
    expect(proxied.headers.get('content-type')).to.equal('text/plain');
    expect(await proxied.text()).to.equal('redirected bytes');
    const head = await fetch(`${env.p.endpoint}/${bucket}/dir/a%20file.txt`, { method: 'HEAD', headers: auth() });
    expect(head.status).to.equal(200);
    expect(head.headers.get('content-length')).to.equal('16');
    const missing = await fetch(`${env.p.endpoint}/${bucket}/nothing-here`, { headers: auth(), redirect: 'manual' });
    expect(missing.status).to.equal(404);
    expect(await missing.text()).to.contain('<Code>NoSuchKey</Code>');
  });

  it('presign route: GET and PUT URLs with expiresAt; bad method or expiry refused', async () => {
    const put = await fetch(`${env.p.endpoint}/${bucket}/presigned.txt?presign&method=PUT&expires=120`, { headers: auth() });
    expect(put.status).to.equal(200);
    const putData = ((await put.json()) as { data: { url: string; expiresAt: string } }).data;
    expect(Date.parse(putData.expiresAt)).to.be.greaterThan(Date.now());
    expect((await fetch(putData.url, { method: 'PUT', body: 'via presigned PUT' })).status).to.equal(200);
    const get = await fetch(`${env.p.endpoint}/${bucket}/presigned.txt?presign&method=GET&expires=120`, { headers: auth() });
    const getData = ((await get.json()) as { data: { url: string } }).data;
    expect(await (await fetch(getData.url)).text()).to.equal('via presigned PUT');
    // A URL for GET cannot be used to PUT.
    expect((await fetch(getData.url, { method: 'PUT', body: 'overwrite' })).status).to.equal(403);
    const badMethod = await fetch(`${env.p.endpoint}/${bucket}/presigned.txt?presign&method=DELETE`, { headers: auth() });
    expect(badMethod.status).to.equal(400);
    expect(((await badMethod.json()) as { error: { code: string } }).error.code).to.equal('InvalidArgument');
    const tooLong = await fetch(`${env.p.endpoint}/${bucket}/presigned.txt?presign&method=GET&expires=604801`, { headers: auth() });
    expect(tooLong.status).to.equal(400);
  });

  it('admin API: root creates a user who logs in and signs; recycle bin, restore and purge', async () => {
    const created = await fetch(`${env.p.endpoint}/admin/users`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bob', password: 'bob-password-1' }),
    });
    expect(created.status).to.equal(201);
    const bob = ((await created.json()) as { data: { username: string; accessKey: string; secretKey: string } }).data;
    expect(bob.username).to.equal('bob');
    const bobToken = await login(env.p.endpoint, 'bob', 'bob-password-1');
    const notRoot = await fetch(`${env.p.endpoint}/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bobToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'eve', password: 'eve-password-1' }),
    });
    expect(notRoot.status).to.equal(403);
    const bobS3 = sdkClient(env.p.endpoint, bob.accessKey, bob.secretKey);
    const bobBucket = bucketName('bob');
    await bobS3.send(new CreateBucketCommand({ Bucket: bobBucket }));
    await bobS3.send(new PutObjectCommand({ Bucket: bobBucket, Key: 'keep.txt', Body: 'restore me' }));
    await fetch(`${env.p.endpoint}/${bobBucket}/keep.txt`, { method: 'DELETE', headers: { authorization: `Bearer ${bobToken}` } });
    const gone = await fetch(`${env.p.endpoint}/${bobBucket}/keep.txt?proxy=true`, { headers: { authorization: `Bearer ${bobToken}` } });
    expect(gone.status).to.equal(404);

    const bin = await fetch(`${env.p.endpoint}/admin/recycle-bin?bucket=${bobBucket}`, { headers: { authorization: `Bearer ${bobToken}` } });
    const objects = ((await bin.json()) as { data: { objects: Array<{ id: string; key: string }> } }).data.objects;
    expect(objects.map((o) => o.key)).to.deep.equal(['keep.txt']);
    // Root's recycle bin does not show bob's objects.
    const rootBin = await fetch(`${env.p.endpoint}/admin/recycle-bin`, { headers: auth() });
    expect(((await rootBin.json()) as { data: { objects: Array<{ key: string }> } }).data.objects.map((o) => o.key)).not.to.include('keep.txt');
    // Paged: max-items and the continuation token of the previous page.
    await bobS3.send(new PutObjectCommand({ Bucket: bobBucket, Key: 'other.txt', Body: 'x' }));
    await fetch(`${env.p.endpoint}/${bobBucket}/other.txt`, { method: 'DELETE', headers: { authorization: `Bearer ${bobToken}` } });
    type BinPage = { data: { objects: Array<{ key: string }>; isTruncated: boolean; nextToken?: string } };
    const first = (await (
      await fetch(`${env.p.endpoint}/admin/recycle-bin?bucket=${bobBucket}&max-items=1`, { headers: { authorization: `Bearer ${bobToken}` } })
    ).json()) as BinPage;
    expect([first.data.objects.map((o) => o.key), first.data.isTruncated]).to.deep.equal([['keep.txt'], true]);
    const second = (await (
      await fetch(`${env.p.endpoint}/admin/recycle-bin?bucket=${bobBucket}&max-items=1&continuation-token=${first.data.nextToken}`, {
        headers: { authorization: `Bearer ${bobToken}` },
      })
    ).json()) as BinPage;
    expect([second.data.objects.map((o) => o.key), second.data.isTruncated, second.data.nextToken]).to.deep.equal([['other.txt'], false, undefined]);
    expect((await fetch(`${env.p.endpoint}/admin/recycle-bin?max-items=many`, { headers: { authorization: `Bearer ${bobToken}` } })).status).to.equal(400);
    const restored = await fetch(`${env.p.endpoint}/admin/recycle-bin/${objects[0].id}/restore`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bobToken}` },
    });
    expect(restored.status).to.equal(200);
    const again = await fetch(`${env.p.endpoint}/${bobBucket}/keep.txt?proxy=true`, { headers: { authorization: `Bearer ${bobToken}` } });
    expect(await again.text()).to.equal('restore me');

    expect((await fetch(`${env.p.endpoint}/admin/purge`, { method: 'POST', headers: { authorization: `Bearer ${bobToken}` } })).status).to.equal(403);
    expect((await adminPurge(env.p.endpoint, auth())).purged).to.be.a('number');
    bobS3.destroy();
  });

  it('root password also works as the root SigV4 secret', async () => {
    const client = sdkClient(env.p.endpoint, 'strata', ROOT_PASSWORD);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'root.txt', Body: 'root' }));
    client.destroy();
  });
});
