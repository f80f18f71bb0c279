import {
  CreateBucketCommand,
  DeleteBucketCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutBucketAclCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { eventually } from '../support/eventually.js';
import { awsCli } from './support/cli.js';
import { platformHooks, ROOT_USER } from './support/platform.js';
import { bodyText, bucketName, createTenant, describeWithBucket, s3ErrorOf, s3Failure, sdkClient, type Tenant } from './support/s3.js';

/** A bucket of `s3`'s with ACLs on (ObjectWriter) and the canned ACL `public-read-write`: anyone may write into it. */
async function publicWriteBucket(s3: S3Client, prefix: string): Promise<string> {
  const name = bucketName(prefix);
  await s3.send(new CreateBucketCommand({ Bucket: name, ObjectOwnership: 'ObjectWriter' }));
  await s3.send(new PutBucketAclCommand({ Bucket: name, ACL: 'public-read-write' }));
  return name;
}

/** An anonymous request answered with its status and S3 error code. */
async function anonymous(endpoint: string, method: string, target: string, init: { body?: string | FormData; headers?: Record<string, string> } = {}) {
  const r = await fetch(`${endpoint}${target}`, { method, ...init });
  return { status: r.status, code: s3ErrorOf(await r.text()).code };
}

/** Raw HTTP/1.1 on one socket: `head` is sent (its line ends as CRLF), and the text received is read as it arrives. */
function rawExchange(endpoint: string, head: string): { socket: net.Socket; received: () => string } {
  const url = new URL(endpoint);
  const socket = net.connect(Number(url.port), url.hostname);
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  socket.write(head.replace(/\r?\n/g, '\r\n'));
  return { socket, received: () => text };
}

/** The files that hold object bytes under a platform's data directory: blobs, and temp files of uploads under way. */
async function byteFiles(dataDir: string): Promise<string[]> {
  const entries = await readdir(dataDir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && e.parentPath.split(path.sep).includes('blobs'))
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
}

/** An anonymous PUT of `body` to `target`, in two pieces: the request with the first half, then the rest. */
function putInTwo(host: string, target: string, body: string): [string, string] {
  const half = body.length / 2;
  return [`PUT ${target} HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, half)}`, body.slice(half)];
}

/** An anonymous form upload (POST Object, no policy) of `body` as `key` into `bucket`, in two pieces as putInTwo. */
function postInTwo(host: string, bucket: string, key: string, body: string): [string, string] {
  const half = body.length / 2;
  const start = `--fence\r\nContent-Disposition: form-data; name="key"\r\n\r\n${key}\r\n--fence\r\nContent-Disposition: form-data; name="file"; filename="${key}"\r\n\r\n`;
  const form = `${start}${body}\r\n--fence--\r\n`;
  const head = `POST /${bucket} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: multipart/form-data; boundary=fence\r\nContent-Length: ${form.length}\r\n\r\n`;
  return [head + start + body.slice(0, half), form.slice(start.length + half)];
}

describeWithBucket('e2e: anonymous writes into a public-read-write bucket (S3 with ACLs in force)', 'anonw', (env) => {
  let bob: Tenant;
  before(async () => {
    bob = await createTenant(env.p.endpoint, 'anonw-bob');
  });
  after(() => bob?.s3.destroy());

  it('`aws s3 cp --no-sign-request` and an anonymous curl-style PUT store objects the bucket owner owns and reads; DELETE removes one', async () => {
    const b = await publicWriteBucket(env.s3, 'anonw-cli');
    const home = await mkdtemp(path.join(os.tmpdir(), 'strata-anonw-'));
    try {
      const file = path.join(home, 'drop.txt');
      await writeFile(file, 'dropped by nobody');
      const cp = await awsCli(env.p.endpoint, home)('s3', 'cp', '--no-sign-request', file, `s3://${b}/drop.txt`);
      expect(cp.code, cp.stderr).to.equal(0);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
    expect(await anonymous(env.p.endpoint, 'PUT', `/${b}/plain.txt`, { body: 'plain' })).to.include({ status: 200 });
    // The bucket owner owns both (row and ACL) and reads them; the listing names it as their owner.
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'drop.txt' })))).to.equal('dropped by nobody');
    expect((await env.s3.send(new GetObjectAclCommand({ Bucket: b, Key: 'plain.txt' }))).Owner?.ID).to.equal(ROOT_USER);
    const listed = await env.s3.send(new ListObjectsV2Command({ Bucket: b, FetchOwner: true }));
    expect(listed.Contents?.map((o) => [o.Key, o.Owner?.ID])).to.deep.equal([
      ['drop.txt', ROOT_USER],
      ['plain.txt', ROOT_USER],
    ]);
    // Written private (no x-amz-acl): anonymous readers are refused, as the object's ACL grants them nothing.
    expect(await anonymous(env.p.endpoint, 'GET', `/${b}/plain.txt`)).to.include({ status: 403, code: 'AccessDenied' });
    expect(await anonymous(env.p.endpoint, 'DELETE', `/${b}/plain.txt`)).to.include({ status: 204 });
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'plain.txt' })))).status).to.equal(404);
  });

  it('`aws s3 cp --no-sign-request` of a 12 MiB file goes up in parts; `aws s3api` lists and aborts an anonymous upload; unsigned copies of public objects; the owner owns them', async () => {
    const b = await publicWriteBucket(env.s3, 'anonw-mp');
    const home = await mkdtemp(path.join(os.tmpdir(), 'strata-anonw-mp-'));
    try {
      const aws = awsCli(env.p.endpoint, home);
      const file = path.join(home, 'big.bin');
      const bytes = randomBytes(12 * 1024 * 1024);
      await writeFile(file, bytes);
      // Above the CLI's 8 MiB threshold: CreateMultipartUpload, two UploadParts, CompleteMultipartUpload, none signed.
      const cp = await aws('s3', 'cp', '--no-sign-request', file, `s3://${b}/big.bin`);
      expect(cp.code, cp.stderr).to.equal(0);
      const head = await env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'big.bin' }));
      expect([head.ContentLength, head.ETag?.endsWith('-2"')]).to.deep.equal([bytes.length, true]);
      expect((await env.s3.send(new GetObjectAclCommand({ Bucket: b, Key: 'big.bin' }))).Owner?.ID).to.equal(ROOT_USER);

      const created = await aws('s3api', 'create-multipart-upload', '--no-sign-request', '--bucket', b, '--key', 'left.bin');
      expect(created.code, created.stderr).to.equal(0);
      const uploadId = (JSON.parse(created.stdout) as { UploadId: string }).UploadId;
      const part = await aws(
        's3api',
        'upload-part',
        '--no-sign-request',
        '--bucket',
        b,
        '--key',
        'left.bin',
        '--upload-id',
        uploadId,
        '--part-number',
        '1',
        '--body',
        file,
      );
      expect(part.code, part.stderr).to.equal(0);
      const parts = await aws('s3api', 'list-parts', '--no-sign-request', '--bucket', b, '--key', 'left.bin', '--upload-id', uploadId);
      expect(parts.code, parts.stderr).to.equal(0);
      expect((JSON.parse(parts.stdout) as { Parts: Array<{ Size: number }> }).Parts.map((p) => p.Size)).to.deep.equal([bytes.length]);
      // bob may write here (AllUsers WRITE) but did not begin it: no listing, no abort.
      expect((await s3Failure(bob.s3.send(new ListPartsCommand({ Bucket: b, Key: 'left.bin', UploadId: uploadId })))).status).to.equal(403);
      const aborted = await aws('s3api', 'abort-multipart-upload', '--no-sign-request', '--bucket', b, '--key', 'left.bin', '--upload-id', uploadId);
      expect(aborted.code, aborted.stderr).to.equal(0);
      expect((await env.s3.send(new ListMultipartUploadsCommand({ Bucket: b }))).Uploads ?? []).to.deep.equal([]);

      // A server-side copy, unsigned: READ on the source (public-read) and WRITE on the bucket suffice, as on S3.
      await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'public.txt', Body: 'readable by all', ACL: 'public-read' }));
      const copied = await aws('s3', 'cp', '--no-sign-request', `s3://${b}/public.txt`, `s3://${b}/copied.txt`);
      expect(copied.code, copied.stderr).to.equal(0);
      expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'copied.txt' })))).to.equal('readable by all');
      const privateCopy = await aws('s3', 'cp', '--no-sign-request', `s3://${b}/big.bin`, `s3://${b}/stolen.bin`);
      expect(privateCopy.code).not.to.equal(0);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
    // Where the bucket grants AllUsers no WRITE, an anonymous initiation is refused before anything is made.
    await env.s3.send(new PutBucketAclCommand({ Bucket: b, ACL: 'public-read' }));
    expect(await anonymous(env.p.endpoint, 'POST', `/${b}/denied.bin?uploads`)).to.include({ status: 403, code: 'AccessDenied' });
  });

  it('an anonymous form upload (no policy, no signature) with acl=public-read is stored and readable by anyone', async () => {
    const b = await publicWriteBucket(env.s3, 'anonw-form');
    const form = new FormData();
    form.set('key', 'form.txt');
    form.set('acl', 'public-read');
    form.set('Content-Type', 'text/plain');
    form.set('file', new Blob(['bar']), 'form.txt');
    expect(await anonymous(env.p.endpoint, 'POST', `/${b}`, { body: form })).to.include({ status: 204 });
    const r = await fetch(`${env.p.endpoint}/${b}/form.txt`);
    expect([r.status, await r.text()]).to.deep.equal([200, 'bar']);
    // Into a bucket that grants AllUsers no WRITE the same form is AccessDenied and stores nothing.
    await env.s3.send(new PutBucketAclCommand({ Bucket: b, ACL: 'public-read' }));
    form.set('key', 'refused.txt');
    expect(await anonymous(env.p.endpoint, 'POST', `/${b}`, { body: form })).to.include({ status: 403, code: 'AccessDenied' });
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'refused.txt' })))).status).to.equal(404);
  });

  it('Expect: 100-continue: an anonymous PUT is refused with 403 before its body where the ACL does not allow it, told 100 where it does', async () => {
    const b = await publicWriteBucket(env.s3, 'anonw-100');
    const closed = bucketName('anonw-closed');
    await env.s3.send(new CreateBucketCommand({ Bucket: closed, ObjectOwnership: 'ObjectWriter' }));
    const host = new URL(env.p.endpoint).host;
    const ask = (bucket: string) => rawExchange(env.p.endpoint, `PUT /${bucket}/cont.txt HTTP/1.1\nHost: ${host}\nContent-Length: 3\nExpect: 100-continue\n\n`);
    const refused = ask(closed);
    try {
      expect(await eventually(() => /^HTTP\/1\.1 (\d{3})/.exec(refused.received())?.[1] ?? false, 'an answer to the headers')).to.equal('403');
    } finally {
      refused.socket.destroy();
    }
    const allowed = ask(b);
    try {
      expect(await eventually(() => /^HTTP\/1\.1 (\d{3})/.exec(allowed.received())?.[1] ?? false, 'an answer to the headers')).to.equal('100');
      allowed.socket.write('abc');
      expect(await eventually(() => /\r\n\r\nHTTP\/1\.1 (\d{3})/.exec(allowed.received())?.[1] ?? false, 'the final answer')).to.equal('200');
    } finally {
      allowed.socket.destroy();
    }
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'cont.txt' })))).to.equal('abc');
  });

  it('Transfer-Encoding: chunked without Content-Length is stored whole; a chunked body cut mid-stream leaves no object', async () => {
    const b = await publicWriteBucket(env.s3, 'anonw-chunked');
    const host = new URL(env.p.endpoint).host;
    const whole = rawExchange(env.p.endpoint, `PUT /${b}/whole.txt HTTP/1.1\nHost: ${host}\nTransfer-Encoding: chunked\n\n5\nhello\n6\n world\n0\n\n`);
    try {
      expect(await eventually(() => /^HTTP\/1\.1 (\d{3})/.exec(whole.received())?.[1] ?? false, 'an answer')).to.equal('200');
    } finally {
      whole.socket.destroy();
    }
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'whole.txt' })))).to.equal('hello world');
    const disconnects = async () => {
      const text = await (await fetch(`${env.p.endpoint}/metrics`)).text();
      return Number(/strata_gateway_client_disconnects_total\{[^}]*operation="PutObject"[^}]*\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    const before = await disconnects();
    const cut = rawExchange(env.p.endpoint, `PUT /${b}/cut.txt HTTP/1.1\nHost: ${host}\nTransfer-Encoding: chunked\nExpect: 100-continue\n\n`);
    // Cut once the handler asked for the body (100 Continue) and had its first chunk; once the gateway saw
    // the client go, the upload is over (counted as a disconnect), and nothing was committed.
    await eventually(() => cut.received().startsWith('HTTP/1.1 100'), 'the gateway asking for the body');
    cut.socket.write('5\r\nhello\r\n');
    cut.socket.destroy();
    await eventually(async () => (await disconnects()) > before, 'the gateway counting the cut upload');
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'cut.txt' })))).status).to.equal(404);
  });

  it('an anonymous PUT or form upload held mid-body while the owner deletes the bucket and creates it again private: 404 NoSuchBucket, nothing in the new bucket, no bytes left', async () => {
    const url = new URL(env.p.endpoint);
    const body = 'x'.repeat(256 * 1024); // above the inline size: the bytes stream into a file
    for (const upload of [(b: string) => putInTwo(url.host, `/${b}/late.txt`, body), (b: string) => postInTwo(url.host, b, 'late.txt', body)]) {
      const b = await publicWriteBucket(env.s3, 'anonw-fence');
      const before = await byteFiles(env.p.dataDir);
      const [first, rest] = upload(b);
      const { socket, received } = rawExchange(env.p.endpoint, first);
      try {
        // Admitted by the public bucket's ACL: its bytes are streaming into a temp file on the data plane.
        await eventually(async () => (await byteFiles(env.p.dataDir)).some((f) => f.endsWith('.tmp')), 'the upload streaming into a temp file');
        await env.s3.send(new DeleteBucketCommand({ Bucket: b }));
        await env.s3.send(new CreateBucketCommand({ Bucket: b }));
        socket.write(rest);
        expect(await eventually(() => /^HTTP\/1\.1 (\d{3})/.exec(received())?.[1] ?? false, 'the answer')).to.equal('404');
        const answer = await eventually(() => (received().includes('</Error>') ? received() : false), 'the error document');
        expect(s3ErrorOf(answer.slice(answer.indexOf('<'))).code).to.equal('NoSuchBucket');
      } finally {
        socket.destroy();
      }
      expect((await env.s3.send(new ListObjectsV2Command({ Bucket: b }))).KeyCount).to.equal(0);
      expect(await byteFiles(env.p.dataDir)).to.deep.equal(before);
    }
  });

  it('an ObjectWriter object’s owner (not the bucket owner) keeps READ_ACP and WRITE_ACP, and its reads, after an empty grant list', async () => {
    const b = await publicWriteBucket(env.s3, 'anonw-owner');
    await bob.s3.send(new PutObjectCommand({ Bucket: b, Key: 'bob.txt', Body: 'bob’s' }));
    await bob.s3.send(new PutObjectAclCommand({ Bucket: b, Key: 'bob.txt', AccessControlPolicy: { Owner: { ID: 'anonw-bob' }, Grants: [] } }));
    const acl = await bob.s3.send(new GetObjectAclCommand({ Bucket: b, Key: 'bob.txt' }));
    expect([acl.Owner?.ID, acl.Grants ?? []]).to.deep.equal(['anonw-bob', []]);
    expect(await bodyText(await bob.s3.send(new GetObjectCommand({ Bucket: b, Key: 'bob.txt' })))).to.equal('bob’s');
    await bob.s3.send(new PutObjectAclCommand({ Bucket: b, Key: 'bob.txt', ACL: 'public-read' }));
    expect((await bob.s3.send(new GetObjectAclCommand({ Bucket: b, Key: 'bob.txt' }))).Grants?.length).to.equal(2);
  });
});

describe('e2e: anonymous writes count against rateLimits.anonymous by client address', function () {
  this.timeout(120_000);
  const p = platformHooks({ gatewayRules: 'rateLimits: { anonymous: { points: 4, duration: 60 } }\n' });

  it('anonymous PUTs and form uploads past the rate are SlowDown and store nothing; the owner is served', async () => {
    const s3 = sdkClient(p.endpoint);
    try {
      const b = await publicWriteBucket(s3, 'anonw-rate');
      const answers: number[] = [];
      for (let i = 0; i < 3; i++) answers.push((await anonymous(p.endpoint, 'PUT', `/${b}/put-${i}.txt`, { body: 'x' })).status);
      const form = new FormData();
      form.set('key', 'form.txt');
      form.set('file', new Blob(['x']), 'form.txt');
      answers.push((await anonymous(p.endpoint, 'POST', `/${b}`, { body: form })).status);
      expect(answers).to.deep.equal([200, 200, 200, 204]);
      expect(await anonymous(p.endpoint, 'PUT', `/${b}/over.txt`, { body: 'x' })).to.include({ status: 503, code: 'SlowDown' });
      form.set('key', 'over-form.txt');
      expect(await anonymous(p.endpoint, 'POST', `/${b}`, { body: form })).to.include({ status: 503, code: 'SlowDown' });
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: b }));
      expect(listed.Contents?.map((o) => o.Key)).to.deep.equal(['form.txt', 'put-0.txt', 'put-1.txt', 'put-2.txt']);
    } finally {
      s3.destroy();
    }
  });
});
