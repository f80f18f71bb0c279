import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { createHash, createHmac } from 'node:crypto';
import http from 'node:http';
import { startGateway } from '../../images/gateway/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { ROOT, startObjectLayer, TOKEN, type ObjectLayer } from '../data-plane/harness.js';
import { codeOf as s3CodeOf } from './handler-app.js';

/**
 * SigV2 requests through a real gateway, control plane and data plane, signed here from the S3
 * documentation: header and presigned query, path and virtual-hosted style, POST forms, and the
 * STRATA_SIGV2=false switch.
 */
const DOMAIN = 's3.sigv2.test';
const BUCKET = 'sigv2-bucket';

function signV2(stringToSign: string, secret = ROOT.password): string {
  return createHmac('sha1', secret).update(stringToSign, 'utf8').digest('base64');
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One request with exactly these headers (Host included; repeated headers as arrays). */
function send(base: string, method: string, target: string, headers: Record<string, string | string[]>, body?: string | Buffer): Promise<Answer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path: target, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A request signed with `Authorization: AWS`: StringToSign = method, Content-MD5, Content-Type, Date,
 * the x-amz-* headers (lower case, sorted, `name:value`), then the resource (`/bucket/key?subresources`).
 */
function signed(
  base: string,
  method: string,
  target: string,
  opts: { resource?: string; headers?: Record<string, string | string[]>; body?: string | Buffer; secret?: string; host?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string | string[]> = { date: new Date().toUTCString(), ...opts.headers };
  const amz = Object.keys(headers)
    .filter((n) => n.startsWith('x-amz-'))
    .sort()
    .map((n) => `${n}:${([] as string[]).concat(headers[n]!).join(',')}\n`)
    .join('');
  const date = headers['x-amz-date'] ? '' : String(headers.date);
  const stringToSign = [method, headers['content-md5'] ?? '', headers['content-type'] ?? '', date, amz + (opts.resource ?? target)].join('\n');
  const host = opts.host ?? new URL(base).host;
  return send(base, method, target, { ...headers, host, authorization: `AWS ${ROOT.user}:${signV2(stringToSign, opts.secret)}` }, opts.body);
}

/** A presigned SigV2 URL: Expires (seconds since the epoch) in place of the Date. */
function presignedV2(base: string, path: string, expires: number): string {
  const signature = signV2(`GET\n\n\n${expires}\n${path}`);
  return `${base}${path}?AWSAccessKeyId=${ROOT.user}&Expires=${expires}&Signature=${encodeURIComponent(signature)}`;
}

/** A SigV2 browser form: the policy (base64) signed with HMAC-SHA1. */
function formV2(key: string, file: string, conditions: unknown[] = [{ bucket: BUCKET }, ['starts-with', '$key', 'forms/']]): FormData {
  const policy = Buffer.from(JSON.stringify({ expiration: new Date(Date.now() + 600_000).toISOString(), conditions })).toString('base64');
  const form = new FormData();
  form.append('key', key);
  form.append('AWSAccessKeyId', ROOT.user);
  form.append('policy', policy);
  form.append('signature', signV2(policy));
  form.append('file', new Blob([file]), 'f.txt');
  return form;
}

describe('gateway: AWS Signature Version 2 over HTTP (real control and data planes)', function () {
  this.timeout(120_000);
  let layer: ObjectLayer;
  let gateway: RunningService;
  let off: RunningService;

  const start = (signatureV2?: boolean) =>
    startGateway({
      port: 0,
      host: '127.0.0.1',
      controlPlaneUrl: layer.cp.url,
      dataPlaneUrl: layer.dp.url,
      internalToken: TOKEN,
      jwtSecret: 'test-jwt-secret-0123456789',
      rootUser: ROOT.user,
      virtualHostDomains: [DOMAIN],
      signatureV2,
      logger: createLogger('test', 'silent'),
    });

  before(async () => {
    layer = await startObjectLayer('pglite');
    gateway = await start();
    off = await start(false);
    const created = await signed(gateway.url, 'PUT', `/${BUCKET}`);
    expect(created.status, created.body).to.equal(200);
  });
  after(async () => {
    await off?.stop(1000);
    await gateway?.stop(1000);
    await layer?.stop();
  });

  it('signed requests write, read, list and delete path style; Content-MD5, Content-Type and repeated x-amz-meta headers are signed', async () => {
    const body = 'hello from sigv2\n';
    const md5 = createHash('md5').update(body).digest('base64');
    const put = await signed(gateway.url, 'PUT', `/${BUCKET}/dir/a%20b.txt`, {
      headers: { 'content-md5': md5, 'content-type': 'text/plain', 'x-amz-meta-reviewer': ['joe', 'jane'], 'x-amz-meta-colour': 'blue' },
      body,
    });
    expect(put.status, put.body).to.equal(200);
    const got = await signed(gateway.url, 'GET', `/${BUCKET}/dir/a%20b.txt`);
    expect([got.status, got.body, got.headers['content-type'], got.headers['x-amz-meta-colour']]).to.deep.equal([200, body, 'text/plain', 'blue']);
    // Only subresources are signed: list parameters are not.
    const list = await signed(gateway.url, 'GET', `/${BUCKET}?list-type=2&prefix=dir%2F`, { resource: `/${BUCKET}` });
    expect(list.status, list.body).to.equal(200);
    expect(list.body).to.contain('<Key>dir/a b.txt</Key>');
    const location = await signed(gateway.url, 'GET', `/${BUCKET}?location`);
    expect(location.status, location.body).to.equal(200);
    const acl = await signed(gateway.url, 'GET', `/${BUCKET}/dir/a%20b.txt?acl`);
    expect(acl.status, acl.body).to.equal(200);
    // x-amz-date in place of Date: the Date line is signed empty.
    const head = await signed(gateway.url, 'HEAD', `/${BUCKET}/dir/a%20b.txt`, { headers: { date: 'garbage', 'x-amz-date': new Date().toUTCString() } });
    expect(head.status).to.equal(200);
    const removed = await signed(gateway.url, 'DELETE', `/${BUCKET}/dir/a%20b.txt`);
    expect(removed.status, removed.body).to.equal(204);
    expect((await signed(gateway.url, 'GET', `/${BUCKET}/dir/a%20b.txt`)).status).to.equal(404);
  });

  it('bucket requests signed as botocore signs them (resource `/bucket/`, trailing slash) are accepted; `/bucket//` is not', async () => {
    const created = await signed(gateway.url, 'PUT', `/${BUCKET}-slash`, { resource: `/${BUCKET}-slash/` });
    expect(created.status, created.body).to.equal(200);
    const location = await signed(gateway.url, 'GET', `/${BUCKET}-slash?location`, { resource: `/${BUCKET}-slash/?location` });
    expect(location.status, location.body).to.equal(200);
    const wrong = await signed(gateway.url, 'GET', `/${BUCKET}-slash?location`, { resource: `/${BUCKET}-slash//?location` });
    expect([wrong.status, s3CodeOf(wrong.body)]).to.deep.equal([403, 'SignatureDoesNotMatch']);
    const removed = await signed(gateway.url, 'DELETE', `/${BUCKET}-slash`, { resource: `/${BUCKET}-slash/` });
    expect(removed.status, removed.body).to.equal(204);
  });

  it('virtual-hosted style: the bucket from the Host is part of the signed resource', async () => {
    const host = `${BUCKET}.${DOMAIN}:${new URL(gateway.url).port}`;
    const put = await signed(gateway.url, 'PUT', '/vh.txt', { host, resource: `/${BUCKET}/vh.txt`, body: 'vh' });
    expect(put.status, put.body).to.equal(200);
    const got = await signed(gateway.url, 'GET', '/vh.txt', { host, resource: `/${BUCKET}/vh.txt` });
    expect([got.status, got.body]).to.deep.equal([200, 'vh']);
    // Signed without the bucket (as if path style at the root): refused.
    const wrong = await signed(gateway.url, 'GET', '/vh.txt', { host });
    expect([wrong.status, s3CodeOf(wrong.body)]).to.deep.equal([403, 'SignatureDoesNotMatch']);
  });

  it('a wrong signature is 403 SignatureDoesNotMatch with the StringToSign, and stores nothing; an unknown key is InvalidAccessKeyId', async () => {
    const date = new Date().toUTCString();
    const r = await signed(gateway.url, 'PUT', `/${BUCKET}/bad.txt`, { headers: { date, 'content-type': 'text/plain' }, body: 'x', secret: 'not-the-secret' });
    expect([r.status, s3CodeOf(r.body)]).to.deep.equal([403, 'SignatureDoesNotMatch']);
    // (The newlines are escaped as character references, which XML readers turn back into newlines.)
    expect(r.body.replaceAll('&#x0A;', '\n'))
      .to.contain(`<StringToSign>PUT\n\ntext/plain\n${date}\n/${BUCKET}/bad.txt</StringToSign>`)
      .and.contain(`<AWSAccessKeyId>${ROOT.user}</AWSAccessKeyId>`);
    expect((await signed(gateway.url, 'GET', `/${BUCKET}/bad.txt`)).status).to.equal(404);
    const unknown = await send(gateway.url, 'GET', `/${BUCKET}`, { date, authorization: 'AWS nobody:abc=' });
    expect([unknown.status, s3CodeOf(unknown.body)]).to.deep.equal([403, 'InvalidAccessKeyId']);
    const skewed = await signed(gateway.url, 'GET', `/${BUCKET}`, { headers: { date: new Date(Date.now() - 16 * 60_000).toUTCString() } });
    expect([skewed.status, s3CodeOf(skewed.body)]).to.deep.equal([403, 'RequestTimeTooSkewed']);
  });

  it('a presigned SigV2 GET works until it expires, then 403 AccessDenied "Request has expired"', async () => {
    expect((await signed(gateway.url, 'PUT', `/${BUCKET}/shared.txt`, { body: 'shared' })).status).to.equal(200);
    const valid = await fetch(presignedV2(gateway.url, `/${BUCKET}/shared.txt`, Math.floor(Date.now() / 1000) + 300));
    expect([valid.status, await valid.text()]).to.deep.equal([200, 'shared']);
    const expired = await fetch(presignedV2(gateway.url, `/${BUCKET}/shared.txt`, Math.floor(Date.now() / 1000) - 1));
    const text = await expired.text();
    expect([expired.status, s3CodeOf(text)]).to.deep.equal([403, 'AccessDenied']);
    expect(text).to.contain('<Message>Request has expired</Message>');
    const tampered = await fetch(presignedV2(gateway.url, `/${BUCKET}/shared.txt`, Math.floor(Date.now() / 1000) + 300).replace('shared.txt', 'other.txt'));
    expect([tampered.status, s3CodeOf(await tampered.text())]).to.deep.equal([403, 'SignatureDoesNotMatch']);
  });

  it('two auth mechanisms in one request are 400 InvalidArgument', async () => {
    const url = presignedV2(gateway.url, `/${BUCKET}/shared.txt`, Math.floor(Date.now() / 1000) + 300);
    const withHeader = await fetch(url, { headers: { authorization: `AWS ${ROOT.user}:abc=` } });
    expect([withHeader.status, s3CodeOf(await withHeader.text())]).to.deep.equal([400, 'InvalidArgument']);
    const withV4Query = await fetch(`${url}&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=x`);
    expect([withV4Query.status, s3CodeOf(await withV4Query.text())]).to.deep.equal([400, 'InvalidArgument']);
    const v2HeaderV4Query = await signed(gateway.url, 'GET', `/${BUCKET}/shared.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256`, { resource: `/${BUCKET}/shared.txt` });
    expect([v2HeaderV4Query.status, s3CodeOf(v2HeaderV4Query.body)]).to.deep.equal([400, 'InvalidArgument']);
  });

  it('a POST form signed with SigV2 uploads; a wrong signature is 403 and stores nothing', async () => {
    const ok = await fetch(`${gateway.url}/${BUCKET}`, { method: 'POST', body: formV2('forms/a.txt', 'from a form') });
    expect(ok.status, await ok.text()).to.equal(204);
    const got = await signed(gateway.url, 'GET', `/${BUCKET}/forms/a.txt`);
    expect([got.status, got.body]).to.deep.equal([200, 'from a form']);
    const bad = formV2('forms/b.txt', 'nope');
    bad.set('signature', signV2('something else'));
    const refused = await fetch(`${gateway.url}/${BUCKET}`, { method: 'POST', body: bad });
    expect([refused.status, s3CodeOf(await refused.text())]).to.deep.equal([403, 'SignatureDoesNotMatch']);
    const outside = await fetch(`${gateway.url}/${BUCKET}`, { method: 'POST', body: formV2('elsewhere/c.txt', 'nope') });
    expect([outside.status, s3CodeOf(await outside.text())]).to.deep.equal([403, 'AccessDenied']);
    for (const key of ['forms/b.txt', 'elsewhere/c.txt']) expect((await signed(gateway.url, 'GET', `/${BUCKET}/${key}`)).status, key).to.equal(404);
  });

  it('a POST form whose fields come as file parts (with a filename, as Python requests sends them) uploads', async () => {
    const plain = formV2('forms/parts.txt', 'fields as files');
    const form = new FormData();
    for (const [name, value] of plain.entries()) {
      if (name === 'file') form.append(name, value);
      else form.append(name, new Blob([value as string]), name);
    }
    const ok = await fetch(`${gateway.url}/${BUCKET}`, { method: 'POST', body: form });
    expect(ok.status, await ok.text()).to.equal(204);
    const got = await signed(gateway.url, 'GET', `/${BUCKET}/forms/parts.txt`);
    expect([got.status, got.body]).to.deep.equal([200, 'fields as files']);
    // Still checked: a key outside the policy is refused.
    const outside = new FormData();
    for (const [name, value] of formV2('elsewhere/parts.txt', 'nope').entries()) {
      if (name === 'file') outside.append(name, value);
      else outside.append(name, new Blob([value as string]), name);
    }
    const refused = await fetch(`${gateway.url}/${BUCKET}`, { method: 'POST', body: outside });
    expect([refused.status, s3CodeOf(await refused.text())]).to.deep.equal([403, 'AccessDenied']);
  });

  it('STRATA_SIGV2=false: header, presigned and form SigV2 requests are 403 AccessDenied saying so; SigV4 still works', async () => {
    const message = /AWS Signature Version 2 is turned off on this server \(STRATA_SIGV2=false\)/;
    const header = await signed(off.url, 'GET', `/${BUCKET}/shared.txt`);
    expect([header.status, s3CodeOf(header.body)]).to.deep.equal([403, 'AccessDenied']);
    expect(header.body).to.match(message);
    const presigned = await fetch(presignedV2(off.url, `/${BUCKET}/shared.txt`, Math.floor(Date.now() / 1000) + 300));
    const presignedText = await presigned.text();
    expect([presigned.status, s3CodeOf(presignedText)]).to.deep.equal([403, 'AccessDenied']);
    expect(presignedText).to.match(message);
    const form = await fetch(`${off.url}/${BUCKET}`, { method: 'POST', body: formV2('forms/off.txt', 'off') });
    const formText = await form.text();
    expect([form.status, s3CodeOf(formText)]).to.deep.equal([403, 'AccessDenied']);
    expect(formText).to.match(message);
    expect((await signed(gateway.url, 'GET', `/${BUCKET}/forms/off.txt`)).status).to.equal(404);
    const s3 = new S3Client({
      endpoint: off.url,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: ROOT.user, secretAccessKey: ROOT.password },
    });
    try {
      const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'shared.txt' }));
      expect(await got.Body!.transformToString()).to.equal('shared');
    } finally {
      s3.destroy();
    }
  });
});
