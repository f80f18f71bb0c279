import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { CreateBucketCommand, ListObjectsV2Command, PutBucketCorsCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import type { BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import { ROOT_PASSWORD, ROOT_USER, startTestPlatform, type TestPlatform } from './support/platform.js';
import { bucketName, md5Hex, rootPresign, sdkClient } from './support/s3.js';

/** What the page's script saw: statuses, the headers it could read, the bytes it got back. */
interface BrowserRun {
  login?: number;
  createBucket?: number;
  put?: { status: number; etag: string | null };
  get?: { status: number; text: string; etag: string | null; requestId: string | null; meta: string | null };
  form?: { status: number; etag: string | null };
  error?: string;
}

/** Runs in the page (another origin than the gateway): the calls a browser application makes. */
async function pageScript(a: {
  gateway: string;
  bucket: string;
  putUrl: string;
  user: string;
  password: string;
  post?: { url: string; fields: Record<string, string> };
}): Promise<BrowserRun> {
  const run: BrowserRun = {};
  try {
    const login = await fetch(`${a.gateway}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: a.user, password: a.password }),
    });
    run.login = login.status;
    const token = ((await login.json()) as { data: { token: string } }).data.token;
    run.createBucket = (await fetch(`${a.gateway}/${a.bucket}`, { method: 'PUT', headers: { authorization: `Bearer ${token}` } })).status;
    const put = await fetch(a.putUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain', 'x-amz-meta-colour': 'blue' },
      body: 'uploaded from a browser page',
    });
    run.put = { status: put.status, etag: put.headers.get('etag') };
    const get = await fetch(`${a.gateway}/${a.bucket}/page.txt?proxy=true`, { headers: { authorization: `Bearer ${token}` } });
    run.get = {
      status: get.status,
      text: await get.text(),
      etag: get.headers.get('etag'),
      requestId: get.headers.get('x-amz-request-id'),
      meta: get.headers.get('x-amz-meta-colour'),
    };
    if (a.post) {
      // A form upload, as an <input type=file> would send it: the signed fields, then the file.
      const form = new FormData();
      for (const [name, value] of Object.entries(a.post.fields)) form.append(name, value);
      form.append('file', new Blob(['picked in a file input'], { type: 'text/plain' }), 'picked.txt');
      const posted = await fetch(a.post.url, { method: 'POST', body: form });
      run.form = { status: posted.status, etag: posted.headers.get('etag') };
    }
  } catch (err) {
    run.error = String(err);
  }
  return run;
}

/** Runs in the page: each URL fetched (GETs plainly; PUTs with a custom header, so the browser preflights them). */
async function pageFetches(urls: Record<string, string>): Promise<Record<string, { status?: number; text?: string; etag?: string | null; error?: string }>> {
  const out: Record<string, { status?: number; text?: string; etag?: string | null; error?: string }> = {};
  for (const [name, url] of Object.entries(urls)) {
    const init: RequestInit | undefined = name.endsWith('Put')
      ? { method: 'PUT', headers: { 'content-type': 'text/plain', 'x-amz-meta-from': 'page' }, body: 'put from the page' }
      : undefined;
    try {
      const r = await fetch(url, init);
      out[name] = { status: r.status, text: await r.text(), etag: r.headers.get('etag') };
    } catch (err) {
      out[name] = { error: String(err) };
    }
  }
  return out;
}

describe('e2e: a browser page on another origin uses the gateway (CORS, Chromium)', function () {
  this.timeout(120_000);
  let profile: string;
  let context: BrowserContext;
  let page: Page;
  let pageServer: http.Server;
  let pageOrigin: string;

  before(async () => {
    // The application's page, served from its own origin (another port).
    pageServer = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title><p>app</p>'));
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    profile = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-cors-chromium-'));
    context = await launchChromium(profile);
    page = context.pages()[0] ?? (await context.newPage());
    await page.goto(pageOrigin);
  });
  after(async () => {
    await context?.close();
    await new Promise((resolve) => pageServer?.close(resolve));
    if (profile) fs.rmSync(profile, { recursive: true, force: true });
  });

  async function runPage(p: TestPlatform, bucket: string, post?: { url: string; fields: Record<string, string> }): Promise<BrowserRun> {
    const putUrl = rootPresign(p.endpoint, 'PUT', `/${bucket}/page.txt`, { expiresSeconds: 300, headers: { 'x-amz-meta-colour': 'blue' } });
    return page.evaluate(pageScript, { gateway: p.endpoint, bucket, putUrl, user: ROOT_USER, password: ROOT_PASSWORD, post });
  }

  it('logs in, creates a bucket, uploads to a presigned URL and with a form, and reads the object back with its headers', async () => {
    const p = await startTestPlatform();
    try {
      const bucket = bucketName('cors');
      // The application server signs a form upload policy for the page (the bucket is created by the page first).
      const client = sdkClient(p.endpoint);
      const post = await createPresignedPost(client, {
        Bucket: bucket,
        Key: 'from-form/${filename}',
        Expires: 300,
        Conditions: [['starts-with', '$key', 'from-form/']],
      });
      client.destroy();
      const run = await runPage(p, bucket, post);
      expect(run.error).to.equal(undefined);
      expect(run).to.deep.include({ login: 200, createBucket: 200 });
      const etag = `"${md5Hex('uploaded from a browser page')}"`;
      expect(run.put).to.deep.equal({ status: 200, etag });
      expect(run.get).to.deep.include({ status: 200, text: 'uploaded from a browser page', etag, meta: 'blue' });
      expect(run.get?.requestId).to.match(/^[0-9A-F]{16}$/);
      expect(run.form).to.deep.equal({ status: 204, etag: `"${md5Hex('picked in a file input')}"` });
      const stored = await fetch(rootPresign(p.endpoint, 'GET', `/${bucket}/from-form/picked.txt`));
      expect(await stored.text()).to.equal('picked in a file input');
    } finally {
      await p.destroy();
    }
  });

  it('preflights are answered without credentials; origins outside STRATA_CORS_ORIGINS are refused by the browser', async () => {
    const p = await startTestPlatform(undefined, { corsOrigins: ['https://app.example.com'] });
    try {
      const preflight = (origin: string) =>
        fetch(`${p.endpoint}/any-bucket/key`, {
          method: 'OPTIONS',
          headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'content-type,x-amz-meta-colour' },
        });
      const allowed = await preflight('https://app.example.com');
      expect(allowed.status).to.equal(200);
      expect(allowed.headers.get('access-control-allow-origin')).to.equal('https://app.example.com');
      expect(allowed.headers.get('access-control-allow-methods')).to.include('PUT');
      expect(allowed.headers.get('access-control-allow-headers')).to.equal('content-type,x-amz-meta-colour');
      const other = await preflight(pageOrigin);
      expect(other.headers.get('access-control-allow-origin')).to.equal(null);
      // Requests without an Origin (CLIs, SDKs) get no CORS headers at all.
      expect((await fetch(`${p.endpoint}/healthz`)).headers.get('access-control-allow-origin')).to.equal(null);
      // The page's own origin is not allowed here: its very first call fails in the browser.
      const run = await runPage(p, bucketName('cors'));
      expect(run.login).to.equal(undefined);
      expect(run.error).to.match(/TypeError: Failed to fetch/);
    } finally {
      await p.destroy();
    }
  });

  it("a bucket's own CORS rules (PutBucketCors) decide for that bucket: its page origin may GET and PUT although the server-wide list does not name it", async () => {
    const p = await startTestPlatform(undefined, { corsOrigins: ['https://app.example.com'] });
    const client = sdkClient(p.endpoint);
    try {
      const open = bucketName('cors-open');
      const closed = bucketName('cors-closed');
      for (const b of [open, closed]) {
        await client.send(new CreateBucketCommand({ Bucket: b }));
        await client.send(new PutObjectCommand({ Bucket: b, Key: 'hello.txt', Body: `hello from ${b}` }));
      }
      await client.send(
        new PutBucketCorsCommand({
          Bucket: open,
          CORSConfiguration: {
            CORSRules: [
              { AllowedOrigins: [pageOrigin], AllowedMethods: ['GET', 'PUT'], AllowedHeaders: ['content-type', 'x-amz-meta-*'], ExposeHeaders: ['ETag'] },
            ],
          },
        }),
      );
      await client.send(
        new PutBucketCorsCommand({
          Bucket: closed,
          CORSConfiguration: { CORSRules: [{ AllowedOrigins: ['https://elsewhere.example'], AllowedMethods: ['GET', 'PUT'] }] },
        }),
      );
      // The PUTs carry x-amz-meta-from (see pageFetches): a presigned URL must sign every x-amz-* header sent with it.
      const sign = (method: string, b: string, key: string) =>
        rootPresign(p.endpoint, method, `/${b}/${key}`, { expiresSeconds: 300, headers: method === 'PUT' ? { 'x-amz-meta-from': 'page' } : {} });
      const urls = {
        openGet: sign('GET', open, 'hello.txt'),
        openPut: sign('PUT', open, 'put.txt'),
        closedGet: sign('GET', closed, 'hello.txt'),
        closedPut: sign('PUT', closed, 'put.txt'),
      };
      const seen = await page.evaluate(pageFetches, urls);
      expect(seen.openGet).to.deep.equal({ status: 200, text: `hello from ${open}`, etag: `"${md5Hex(`hello from ${open}`)}"` });
      expect(seen.openPut).to.deep.include({ status: 200, etag: `"${md5Hex('put from the page')}"` });
      expect(seen.closedGet)
        .to.have.property('error')
        .that.matches(/Failed to fetch/);
      expect(seen.closedPut)
        .to.have.property('error')
        .that.matches(/Failed to fetch/);
      // The refused preflight never reached the PUT: nothing was stored in the closed bucket.
      const listed = await client.send(new ListObjectsV2Command({ Bucket: closed }));
      expect(listed.Contents?.map((o) => o.Key)).to.deep.equal(['hello.txt']);
    } finally {
      client.destroy();
      await p.destroy();
    }
  });
});
