import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import {
  STREAMING_PAYLOAD,
  canonicalRequest,
  chunkStringToSign,
  credentialScope,
  sha256Hex,
  sign,
  signingKey,
  stringToSign,
  toAmzDate,
} from '../../images/gateway/src/auth/sigv4.js';
import { rawRequest } from '../support/http.js';
import { JWT_SECRET, platformHooks, ROOT_PASSWORD, ROOT_USER, startTestPlatform, type TestPlatform } from './support/platform.js';
import { bodyBytes, bucketName, login, s3ErrorOf, s3Failure, sdkClient, tenantClient } from './support/s3.js';

/** A signed aws-chunked PUT (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) of `datas` as chunks, sent raw. */
function chunkedPut(endpoint: string, target: string, datas: Buffer[]): Promise<{ status: number; body: string }> {
  const u = new URL(endpoint);
  const now = new Date();
  const amzDate = toAmzDate(now);
  const scope = credentialScope(amzDate.slice(0, 8), 'us-east-1');
  const key = signingKey(ROOT_PASSWORD, amzDate.slice(0, 8), 'us-east-1');
  const frames: Buffer[] = [];
  const decoded = datas.reduce((n, d) => n + d.length, 0);
  const headers: Record<string, string> = {
    host: u.host,
    'content-encoding': 'aws-chunked',
    'x-amz-content-sha256': STREAMING_PAYLOAD,
    'x-amz-date': amzDate,
    'x-amz-decoded-content-length': String(decoded),
  };
  const signed = Object.keys(headers).sort();
  const seed = sign(
    key,
    stringToSign(amzDate, scope, canonicalRequest({ method: 'PUT', path: target, query: [], headers, signedHeaders: signed, payloadHash: STREAMING_PAYLOAD })),
  );
  let previous = seed;
  for (const data of [...datas, Buffer.alloc(0)]) {
    previous = sign(key, chunkStringToSign(amzDate, scope, previous, sha256Hex(data)));
    frames.push(Buffer.from(`${data.length.toString(16)};chunk-signature=${previous}\r\n`), data, Buffer.from('\r\n'));
  }
  const body = Buffer.concat(frames);
  const authorization = `AWS4-HMAC-SHA256 Credential=${ROOT_USER}/${scope},SignedHeaders=${signed.join(';')},Signature=${seed}`;
  return rawRequest(endpoint, 'PUT', target, { ...headers, authorization }, body);
}

/**
 * Issue 29 (gateway auth): unsigned x-amz-* headers and the SigV4 credential scope, expired presigned
 * URLs, bearer tokens without expiry or without a user, unknown Expect headers, re-creating an owned
 * bucket, and the default /login brute-force limits.
 */
describe('e2e: gateway authentication as S3 checks it', function () {
  this.timeout(120_000);
  let p: TestPlatform;
  const bucket = bucketName('authn');

  before(async () => {
    p = await startTestPlatform();
    const s3 = sdkClient(p.endpoint);
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'secret.txt', Body: 'the signer never allowed copying this' }));
    s3.destroy();
  });
  after(async () => p?.destroy());

  it('a presigned PUT or UploadPart URL plus an unsigned x-amz-copy-source is AccessDenied, never a copy', async () => {
    const s3 = sdkClient(p.endpoint);
    const copySource = { 'x-amz-copy-source': `/${bucket}/secret.txt` };
    const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'uploads/mine.txt' }), { expiresIn: 300 });
    const put = await fetch(putUrl, { method: 'PUT', headers: copySource, body: '' });
    expect(put.status).to.equal(403);
    expect(s3ErrorOf(await put.text())).to.deep.equal({ code: 'AccessDenied', message: 'There were headers present in the request which were not signed' });
    expect((await s3Failure(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'uploads/mine.txt' })))).status).to.equal(404);

    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'uploads/parts.bin' }));
    const partUrl = await getSignedUrl(s3, new UploadPartCommand({ Bucket: bucket, Key: 'uploads/parts.bin', UploadId, PartNumber: 1 }), { expiresIn: 300 });
    const part = await fetch(partUrl, { method: 'PUT', headers: copySource, body: '' });
    expect(part.status).to.equal(403);
    expect(s3ErrorOf(await part.text()).code).to.equal('AccessDenied');
    expect((await s3.send(new ListPartsCommand({ Bucket: bucket, Key: 'uploads/parts.bin', UploadId }))).Parts ?? []).to.have.length(0);
    // The same URLs, used as signed, still work.
    expect((await fetch(putUrl, { method: 'PUT', body: 'mine' })).status).to.equal(200);
    s3.destroy();
  });

  it('aws-chunked: a signed upload larger than one network read streams through and is stored whole', async () => {
    const datas = [Buffer.alloc(1024 * 1024, 'a'), Buffer.alloc(300 * 1024, 'b')];
    const ok = await chunkedPut(p.endpoint, `/${bucket}/chunked/good.bin`, datas);
    expect(ok.status, ok.body).to.equal(200);
    const s3 = sdkClient(p.endpoint);
    expect((await bodyBytes(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'chunked/good.bin' })))).equals(Buffer.concat(datas))).to.equal(true);
    s3.destroy();
  });

  it('a credential scope naming another region answers AuthorizationHeaderMalformed / AuthorizationQueryParametersError', async () => {
    const elsewhere = sdkClient(p.endpoint);
    elsewhere.config.region = async () => 'eu-west-1';
    const header = await s3Failure(elsewhere.send(new GetObjectCommand({ Bucket: bucket, Key: 'secret.txt' })));
    expect(header).to.deep.equal({ name: 'AuthorizationHeaderMalformed', status: 400 });
    const url = await getSignedUrl(elsewhere, new GetObjectCommand({ Bucket: bucket, Key: 'secret.txt' }), { expiresIn: 300 });
    const query = await fetch(url);
    expect(query.status).to.equal(400);
    const error = s3ErrorOf(await query.text());
    expect(error.code).to.equal('AuthorizationQueryParametersError');
    expect(error.message.replace(/&apos;/g, "'")).to.contain("the region 'eu-west-1' is wrong; expecting 'us-east-1'");
    elsewhere.destroy();
  });

  it('an expired presigned URL answers 403 AccessDenied "Request has expired"', async () => {
    const s3 = sdkClient(p.endpoint);
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: 'secret.txt' }), {
      expiresIn: 60,
      signingDate: new Date(Date.now() - 3600_000),
    });
    const r = await fetch(url);
    expect(r.status).to.equal(403);
    expect(s3ErrorOf(await r.text())).to.deep.equal({ code: 'AccessDenied', message: 'Request has expired' });
    s3.destroy();
  });

  it('a bearer token without an expiry, or whose user is not (or no longer) in the users table, is refused', async () => {
    const get = (token: string) => fetch(`${p.endpoint}/${bucket}/secret.txt?proxy=true`, { headers: { authorization: `Bearer ${token}` } });
    expect((await get(await login(p.endpoint))).status).to.equal(200);
    for (const token of [
      jwt.sign({ sub: ROOT_USER, ak: ROOT_USER }, JWT_SECRET, { algorithm: 'HS256' }),
      jwt.sign({ sub: 'ghost', ak: 'GHOSTKEYGHOSTKEY' }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 600 }),
      jwt.sign({ sub: 'ghost', ak: ROOT_USER }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 600 }),
    ]) {
      const r = await get(token);
      expect(r.status).to.equal(403);
      expect(s3ErrorOf(await r.text()).code).to.equal('AccessDenied');
    }
  });

  it('an Expect header other than 100-continue is ignored, as S3 does (no 417)', async () => {
    const token = await login(p.endpoint);
    const answer = await rawRequest(p.endpoint, 'GET', `/${bucket}/secret.txt?proxy=true`, { authorization: `Bearer ${token}`, expect: 'something-else' });
    expect(answer).to.deep.equal({ status: 200, body: 'the signer never allowed copying this' });
  });

  it('CreateBucket of a bucket the caller owns answers 200 (us-east-1); of another tenant’s, BucketAlreadyExists', async () => {
    const s3 = sdkClient(p.endpoint);
    expect((await s3.send(new CreateBucketCommand({ Bucket: bucket }))).$metadata.httpStatusCode).to.equal(200);
    expect(await (await bodyBytes(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'secret.txt' })))).toString()).to.contain('never allowed');
    const other = await tenantClient(p.endpoint, 'authn-eve');
    expect(await s3Failure(other.send(new CreateBucketCommand({ Bucket: bucket })))).to.deep.equal({ name: 'BucketAlreadyExists', status: 409 });
    other.destroy();
    s3.destroy();
  });

  it('/login limits are on by default: the 11th wrong password of one user from one IP answers 429 with Retry-After', async () => {
    const attempt = (password: string) =>
      fetch(`${p.endpoint}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': '198.51.100.7' },
        body: JSON.stringify({ username: ROOT_USER, password }),
      });
    for (let i = 0; i < 10; i++) expect((await attempt('wrong')).status).to.equal(401);
    const refused = await attempt(ROOT_PASSWORD);
    expect(refused.status).to.equal(429);
    expect(Number(refused.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(((await refused.json()) as { error: { code: string } }).error.code).to.equal('TooManyRequests');
  });
});

describe('e2e: /login brute-force limits from the rules file', function () {
  this.timeout(120_000);
  const p = platformHooks({
    gatewayRules: 'login:\n  failuresPerIp: { points: 5, duration: 60 }\n  failuresPerUser: { points: 3, duration: 60 }\n',
    // The test stands for an ingress on loopback that names each client's address.
    env: { STRATA_TRUST_PROXY: 'loopback' },
  });

  before(async () => {
    const s3 = await tenantClient(p.endpoint, 'dave');
    s3.destroy();
  });

  const attempt = (ip: string, username: string, password: string) =>
    fetch(`${p.endpoint}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
      body: JSON.stringify({ username, password }),
    });

  it('locks one username from one IP after its failures; other users and other IPs go on', async () => {
    for (let i = 0; i < 3; i++) expect((await attempt('203.0.113.1', ROOT_USER, 'wrong')).status).to.equal(401);
    const locked = await attempt('203.0.113.1', ROOT_USER, ROOT_PASSWORD);
    expect(locked.status).to.equal(429);
    expect(Number(locked.headers.get('retry-after'))).to.be.within(1, 60);
    expect((await attempt('203.0.113.1', 'dave', 'dave-password-1')).status).to.equal(200);
    expect((await attempt('203.0.113.2', ROOT_USER, ROOT_PASSWORD)).status).to.equal(200);
  });

  it('a successful login clears the username+IP count', async () => {
    for (let i = 0; i < 2; i++) expect((await attempt('203.0.113.3', 'dave', 'wrong')).status).to.equal(401);
    expect((await attempt('203.0.113.3', 'dave', 'dave-password-1')).status).to.equal(200);
    for (let i = 0; i < 2; i++) expect((await attempt('203.0.113.3', 'dave', 'wrong')).status).to.equal(401);
    expect((await attempt('203.0.113.3', 'dave', 'dave-password-1')).status).to.equal(200);
  });

  it('refuses an IP past its failures whatever username it tries', async () => {
    for (let i = 0; i < 5; i++) expect((await attempt('203.0.113.4', `nobody-${i}`, 'wrong')).status).to.equal(401);
    const refused = await attempt('203.0.113.4', 'dave', 'dave-password-1');
    expect(refused.status).to.equal(429);
    expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
    expect((await attempt('203.0.113.5', 'dave', 'dave-password-1')).status).to.equal(200);
  });
});

describe('e2e: /login limits count the connecting address unless a trusted proxy names another', function () {
  this.timeout(120_000);
  // No proxy trusted: as for a client that reaches the gateway directly.
  const p = platformHooks({ gatewayRules: 'login:\n  failuresPerIp: { points: 3, duration: 60 }\n', env: { STRATA_TRUST_PROXY: 'false' } });

  it('a client cannot escape its per-IP limit by sending a new X-Forwarded-For each time', async () => {
    const attempt = (ip: string, password: string) =>
      fetch(`${p.endpoint}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
        body: JSON.stringify({ username: `nobody-${ip}`, password }),
      });
    for (let i = 0; i < 3; i++) expect((await attempt(`198.51.100.${i + 10}`, 'wrong')).status).to.equal(401);
    expect((await attempt('198.51.100.99', 'wrong')).status).to.equal(429);
  });
});
