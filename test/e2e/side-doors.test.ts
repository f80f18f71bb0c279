import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import net from 'node:net';
import { expect } from 'chai';
import { httpExchange } from '../support/http.js';
import { platformHooks, ROOT_PASSWORD, ROOT_USER } from './support/platform.js';
import { bearer, bodyText, bucketName, login, md5Hex, presignedFetch, s3ErrorOf, s3Failure, sdkClient } from './support/s3.js';

/** POST /login from the local address `from` (any 127.x reaches the loopback-bound gateway), with extra headers. */
async function loginFrom(endpoint: string, from: string, password: string, headers: Record<string, string> = {}, username = ROOT_USER): Promise<number> {
  const body = JSON.stringify({ username, password });
  const answer = await httpExchange(
    endpoint,
    {
      method: 'POST',
      path: '/login',
      localAddress: from,
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers },
    },
    body,
  );
  return answer.status;
}

/**
 * A request with `Expect: 100-continue` over a raw socket: the first status line the server sends, and
 * (when that is 100 Continue) the final one after the body is sent.
 */
function expectContinue(endpoint: string, head: string, body: Buffer): Promise<{ first: string; final?: string }> {
  const { hostname, port } = new URL(endpoint);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    let received = '';
    let first: string | undefined;
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      for (let end = received.indexOf('\r\n\r\n'); end >= 0; end = received.indexOf('\r\n\r\n')) {
        const status = received.slice(0, received.indexOf('\r\n'));
        received = received.slice(end + 4);
        if (first === undefined) {
          first = status;
          if (!status.startsWith('HTTP/1.1 100')) {
            socket.destroy();
            return resolve({ first });
          }
          socket.write(body);
        } else {
          socket.destroy();
          return resolve({ first, final: status });
        }
      }
    });
    socket.write(`${head}Host: ${hostname}:${port}\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
  });
}

/** Issue 37, findings 6, 7 and 10: what reaches the gateway beside the signed, authenticated front door. */
describe('e2e: side doors of the gateway', function () {
  this.timeout(120_000);
  const p = platformHooks({ gatewayRules: 'login:\n  failuresPerIp: { points: 5, duration: 60 }\n  failuresPerUser: { points: 3, duration: 60 }\n' });
  const bucket = bucketName('doors');
  const secret = 'the signer stored this and signed nothing else';

  before(async () => {
    const s3 = sdkClient(p.endpoint);
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'secret.txt', Body: secret }));
    s3.destroy();
  });

  it('a presigned PUT plus an unsigned x-service-md5 is AccessDenied, never an instant copy of another object', async () => {
    const s3 = sdkClient(p.endpoint);
    const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'uploads/mine.txt' }), { expiresIn: 300 });
    const body = 'x'.repeat(secret.length);
    const put = await fetch(putUrl, { method: 'PUT', headers: { 'x-service-md5': md5Hex(secret) }, body });
    expect(put.status).to.equal(403);
    expect(s3ErrorOf(await put.text())).to.deep.equal({ code: 'AccessDenied', message: 'There were headers present in the request which were not signed' });
    expect((await s3Failure(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'uploads/mine.txt' })))).status).to.equal(404);
    // Signed, the header is the signer's own request: an instant upload of the signer's object.
    const signed = await presignedFetch(p.endpoint, 'PUT', `/${bucket}/uploads/signed.txt`, { headers: { 'x-service-md5': md5Hex(secret) }, body });
    expect(signed.status).to.equal(200);
    expect(((await signed.json()) as { data: { instant: boolean } }).data.instant).to.equal(true);
    // Bearer clients keep instant upload as before.
    const token = await login(p.endpoint);
    const viaBearer = await fetch(`${p.endpoint}/${bucket}/uploads/bearer.txt`, {
      method: 'PUT',
      headers: { ...bearer(token), 'x-service-md5': md5Hex(secret) },
      body,
    });
    expect(((await viaBearer.json()) as { data: { instant: boolean } }).data.instant).to.equal(true);
    expect(await bodyText(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'uploads/bearer.txt' })))).to.equal(secret);
    s3.destroy();
  });

  it('a presigned URL plus a signed Authorization header is refused: only one auth mechanism (a Bearer header still yields)', async () => {
    const s3 = sdkClient(p.endpoint);
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: 'secret.txt' }), { expiresIn: 300 });
    const signature = 'AWS4-HMAC-SHA256 Credential=strata/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00';
    const both = await fetch(url, { headers: { authorization: signature } });
    expect(both.status).to.equal(400);
    expect(s3ErrorOf(await both.text())).to.deep.equal({
      code: 'InvalidArgument',
      message:
        'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified',
    });
    // fetch keeps a Bearer header when it follows the gateway's 302 to a presigned URL.
    const token = await login(p.endpoint);
    expect((await fetch(url, { headers: bearer(token) })).status).to.equal(200);
    s3.destroy();
  });

  it('/admin answers its edge errors in JSON too (a bad target, an anonymous caller)', async () => {
    const token = await login(p.endpoint);
    const badTarget = await fetch(`${p.endpoint}/admin/%FF`, { headers: bearer(token) });
    expect(badTarget.status).to.equal(400);
    expect(badTarget.headers.get('content-type')).to.match(/^application\/json/);
    expect(((await badTarget.json()) as { error: { code: string } }).error.code).to.equal('InvalidURI');
    const anonymous = await fetch(`${p.endpoint}/admin/users`, { method: 'POST', body: '{' });
    expect(anonymous.status).to.equal(403);
    expect(((await anonymous.json()) as { error: { code: string } }).error.code).to.equal('AccessDenied');
    // S3 routes keep S3's XML.
    const s3Side = await fetch(`${p.endpoint}/${bucket}/%FF`, { headers: bearer(token) });
    expect(s3ErrorOf(await s3Side.text()).code).to.equal('InvalidURI');
  });

  it('Expect: 100-continue is answered 100 only once the headers are authenticated', async () => {
    const body = Buffer.alloc(2 * 1024 * 1024, 7);
    const refused = await expectContinue(p.endpoint, `PUT /${bucket}/expect/anonymous.bin HTTP/1.1\r\n`, body);
    expect(refused).to.deep.equal({ first: 'HTTP/1.1 403 Forbidden' });
    const forged = await expectContinue(p.endpoint, `PUT /${bucket}/expect/forged.bin HTTP/1.1\r\nAuthorization: Bearer not-a-token\r\n`, body);
    expect(forged.first).to.equal('HTTP/1.1 403 Forbidden');
    const token = await login(p.endpoint);
    const accepted = await expectContinue(p.endpoint, `PUT /${bucket}/expect/mine.bin HTTP/1.1\r\nAuthorization: Bearer ${token}\r\n`, body);
    expect(accepted).to.deep.equal({ first: 'HTTP/1.1 100 Continue', final: 'HTTP/1.1 200 OK' });
    const credentials = Buffer.from(JSON.stringify({ username: ROOT_USER, password: ROOT_PASSWORD }));
    const loggedIn = await expectContinue(p.endpoint, 'POST /login HTTP/1.1\r\nContent-Type: application/json\r\n', credentials);
    expect(loggedIn).to.deep.equal({ first: 'HTTP/1.1 100 Continue', final: 'HTTP/1.1 200 OK' });
  });

  it('X-Forwarded-For is not believed by default: rotating it escapes no limit, and it cannot lock out the address it names', async () => {
    // An attacker on 127.0.0.3 sends failures in the name of the victim's address, 127.0.0.4.
    for (let i = 0; i < 3; i++) expect(await loginFrom(p.endpoint, '127.0.0.3', 'wrong', { 'x-forwarded-for': '127.0.0.4' })).to.equal(401);
    expect(await loginFrom(p.endpoint, '127.0.0.4', ROOT_PASSWORD)).to.equal(200);
    // Its own address is what counts, whatever it names.
    expect(await loginFrom(p.endpoint, '127.0.0.3', ROOT_PASSWORD, { 'x-forwarded-for': '198.51.100.1' })).to.equal(429);
    const rotating = (i: number) => loginFrom(p.endpoint, '127.0.0.5', 'wrong', { 'x-forwarded-for': `198.51.100.${10 + i}` }, `nobody-${i}`);
    for (let i = 0; i < 5; i++) expect(await rotating(i)).to.equal(401);
    expect(await rotating(5)).to.equal(429);
  });
});
