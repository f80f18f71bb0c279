import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import dns from 'node:dns';
import http from 'node:http';
import type { LookupFunction } from 'node:net';
import { httpExchange, type HttpAnswer } from '../support/http.js';
import { ROOT_PASSWORD, ROOT_USER, startTestPlatform, type TestPlatform } from './support/platform.js';
import { bodyBytes, bucketName, completedParts, login, s3ErrorOf, sdkClient } from './support/s3.js';

/** Names under localhost resolve to this machine (as systemd-resolved and browsers do; this machine's resolver does not). */
const lookup: LookupFunction = (hostname, options, callback) =>
  dns.lookup(hostname === 'localhost' || hostname.endsWith('.localhost') ? '127.0.0.1' : hostname, options, callback);
const agent = new http.Agent({ keepAlive: true, lookup });

function request(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<HttpAnswer> {
  return httpExchange(url, { method: init.method ?? 'GET', headers: init.headers, agent }, init.body);
}

describe('e2e: virtual-hosted-style requests (<bucket>.localhost)', function () {
  this.timeout(120_000);
  let p: TestPlatform;
  let port: string;
  let virtual: S3Client;
  const bucket = bucketName('vhost');

  before(async () => {
    p = await startTestPlatform();
    port = new URL(p.endpoint).port;
    // The SDK's default addressing for a named endpoint: the bucket in the host name.
    virtual = new S3Client({
      endpoint: `http://localhost:${port}`,
      forcePathStyle: false,
      region: 'us-east-1',
      credentials: { accessKeyId: ROOT_USER, secretAccessKey: ROOT_PASSWORD },
      maxAttempts: 1,
      requestHandler: { httpAgent: agent },
    });
  });
  after(async () => {
    virtual?.destroy();
    agent.destroy();
    await p?.destroy();
  });

  const body = randomBytes(10_000);

  it('the SDK works with the bucket in the host: create, put, list, get, head, copy, multipart, delete', async () => {
    const sent: string[] = [];
    virtual.middlewareStack.add(
      (next) => async (args) => {
        const r = args.request as { hostname: string; path: string };
        sent.push(`${r.hostname} ${r.path}`);
        return next(args);
      },
      { step: 'finalizeRequest', priority: 'low', name: 'capture' },
    );
    await virtual.send(new CreateBucketCommand({ Bucket: bucket }));
    await virtual.send(new PutObjectCommand({ Bucket: bucket, Key: 'dir/a.bin', Body: body }));
    expect(sent[0]).to.equal(`${bucket}.localhost /`);
    expect(sent[1]).to.equal(`${bucket}.localhost /dir/a.bin`);
    expect(((await virtual.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key)).to.deep.equal(['dir/a.bin']);
    expect((await bodyBytes(await virtual.send(new GetObjectCommand({ Bucket: bucket, Key: 'dir/a.bin' })))).equals(body)).to.equal(true);
    expect((await virtual.send(new HeadObjectCommand({ Bucket: bucket, Key: 'dir/a.bin' }))).ContentLength).to.equal(body.length);
    await virtual.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy.bin', CopySource: `${bucket}/dir/a.bin` }));
    const part = randomBytes(5 * 1024 * 1024);
    const { UploadId } = await virtual.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'multi.bin' }));
    const one = await virtual.send(new UploadPartCommand({ Bucket: bucket, Key: 'multi.bin', UploadId, PartNumber: 1, Body: part }));
    const two = await virtual.send(new UploadPartCommand({ Bucket: bucket, Key: 'multi.bin', UploadId, PartNumber: 2, Body: body }));
    await virtual.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: 'multi.bin',
        UploadId,
        MultipartUpload: {
          Parts: completedParts([one, two]),
        },
      }),
    );
    expect((await bodyBytes(await virtual.send(new GetObjectCommand({ Bucket: bucket, Key: 'multi.bin' })))).equals(Buffer.concat([part, body]))).to.equal(
      true,
    );
    // The same objects through path-style requests on the bare name and on the address.
    const pathStyle = sdkClient(p.endpoint);
    expect((await bodyBytes(await pathStyle.send(new GetObjectCommand({ Bucket: bucket, Key: 'copy.bin' })))).equals(body)).to.equal(true);
    pathStyle.destroy();
    const deleted = await virtual.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'copy.bin' }, { Key: 'multi.bin' }] } }));
    expect((deleted.Deleted ?? []).map((d) => d.Key).sort()).to.deep.equal(['copy.bin', 'multi.bin']);
    expect(((await virtual.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key)).to.deep.equal(['dir/a.bin']);
    expect(sent.every((line) => line.startsWith(`${bucket}.localhost /`))).to.equal(true);
  });

  it("presigned URLs in the bucket's host verify (the signed path is the one sent); a URL moved to another bucket's host does not", async () => {
    const url = await getSignedUrl(virtual, new GetObjectCommand({ Bucket: bucket, Key: 'dir/a.bin' }), { expiresIn: 60 });
    expect(new URL(url).host).to.equal(`${bucket}.localhost:${port}`);
    expect((await request(url)).status).to.equal(200);
    const moved = new URL(url);
    moved.hostname = `other-${bucket}.localhost`;
    const refused = await request(moved.toString());
    expect(refused.status).to.equal(403);
    expect(s3ErrorOf(refused.body).code).to.equal('SignatureDoesNotMatch');
    const putUrl = await getSignedUrl(virtual, new PutObjectCommand({ Bucket: bucket, Key: 'presigned.txt' }), { expiresIn: 60 });
    expect((await request(putUrl, { method: 'PUT', body: 'up' })).status).to.equal(200);
    expect(
      (await request(`http://localhost:${port}/${bucket}/presigned.txt`, { headers: { authorization: `Bearer ${await login(p.endpoint)}` } })).status,
    ).to.equal(302);
  });

  it("a Bearer GET in the bucket's host redirects to a path-style URL on the domain itself, which serves the bytes", async () => {
    const token = await login(p.endpoint);
    const r = await request(`http://${bucket}.localhost:${port}/dir/a.bin`, { headers: { authorization: `Bearer ${token}` } });
    expect(r.status).to.equal(302);
    const location = new URL(r.headers.location!);
    expect(location.host).to.equal(`localhost:${port}`);
    expect(location.pathname).to.equal(`/${bucket}/dir/a.bin`);
    const followed = await request(location.toString());
    expect(followed.status).to.equal(200);
    expect(followed.bytes.equals(body)).to.equal(true);
  });

  it('hosts outside the domain stay path style; the domain itself lists buckets', async () => {
    const token = await login(p.endpoint);
    const auth = { authorization: `Bearer ${token}` };
    // Not under localhost: "/" is ListBuckets, whatever the host name says.
    const foreign = await request(`http://127.0.0.1:${port}/`, { headers: { ...auth, host: `${bucket}.example.org:${port}` } });
    expect(foreign.status).to.equal(200);
    expect(foreign.body).to.include('<ListAllMyBucketsResult').and.include(`<Name>${bucket}</Name>`);
    const bare = await request(`http://localhost:${port}/`, { headers: auth });
    expect(bare.body).to.include('<ListAllMyBucketsResult');
    // In the bucket's host, "/" is that bucket's listing.
    const listing = await request(`http://${bucket}.localhost:${port}/?list-type=2`, { headers: auth });
    expect(listing.status).to.equal(200);
    expect(listing.body).to.include('<ListBucketResult').and.include('<Key>dir/a.bin</Key>');
  });
});
