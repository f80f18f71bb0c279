import { expect } from 'chai';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { verifySigV4, type Credential } from '../../images/gateway/src/auth/sigv4-verify.js';
import { forgetVerdicts } from '../../images/gateway/src/auth/presigned-verdicts.js';
import { S3Error } from '../../images/object-model/src/index.js';

/**
 * A presigned URL verified once keeps its verdict with every input of its signature
 * (presigned-verdicts.ts): fetched again over the same inputs it is accepted without signing anew, and
 * anything that would change the answer of a full verification (the secret, a signed header, the
 * method, the moment, an unsigned x-amz-* header, the region, the key's existence) still changes it.
 */
describe('gateway: kept verdicts of presigned URLs', () => {
  const now = new Date('2026-12-05T10:00:00Z');
  const origin = 'http://127.0.0.1:9000';
  const host = '127.0.0.1:9000';
  let cred: Credential | undefined;
  const lookup = async (accessKey: string): Promise<Credential> => {
    if (!cred || accessKey !== cred.accessKey) throw new S3Error('InvalidAccessKeyId');
    return cred;
  };
  const presign = (path: string, secret = 'alice-secret-0123456789') =>
    presignUrl({ method: 'GET', origin, path, accessKey: 'AKALICE', secret, region: 'us-east-1', expiresSeconds: 600, now }).slice(origin.length);
  const outcome = async (url: string, o: { method?: string; headers?: Record<string, string>; at?: Date; region?: string } = {}) => {
    try {
      const result = await verifySigV4({ method: o.method ?? 'GET', url, headers: o.headers ?? { host } }, lookup, {
        region: o.region ?? 'us-east-1',
        now: o.at ?? now,
      });
      return `accepted:${result.credential.secretKey}`;
    } catch (err) {
      if (!(err instanceof S3Error)) throw err;
      return `${err.code}: ${err.message}`;
    }
  };

  beforeEach(() => {
    forgetVerdicts();
    cred = { username: 'alice', accessKey: 'AKALICE', secretKey: 'alice-secret-0123456789' };
  });

  it('accepts a URL again, answering the credential the lookup answers now', async () => {
    const url = presign('/b/k.bin');
    expect(await outcome(url)).to.equal('accepted:alice-secret-0123456789');
    cred = { ...cred!, username: 'alice' };
    expect(await outcome(url)).to.equal('accepted:alice-secret-0123456789');
  });

  it('refuses a kept URL once the key has another secret or is gone', async () => {
    const url = presign('/b/k.bin');
    expect(await outcome(url)).to.match(/^accepted/);
    cred = { ...cred!, secretKey: 'rotated-secret-0123456789' };
    expect(await outcome(url)).to.match(/^SignatureDoesNotMatch/);
    // Signed with the new secret, the same path is good, and the old URL still is not.
    const renewed = presign('/b/k.bin', 'rotated-secret-0123456789');
    expect(await outcome(renewed)).to.equal('accepted:rotated-secret-0123456789');
    expect(await outcome(url)).to.match(/^SignatureDoesNotMatch/);
    cred = undefined;
    expect(await outcome(renewed)).to.match(/^InvalidAccessKeyId/);
  });

  it('refuses a kept URL with another signed header value, another method or another region', async () => {
    const url = presign('/b/k.bin');
    expect(await outcome(url)).to.match(/^accepted/);
    expect(await outcome(url, { headers: { host: 'other.example:9000' } })).to.match(/^SignatureDoesNotMatch/);
    expect(await outcome(url, { method: 'PUT' })).to.match(/^SignatureDoesNotMatch/);
    expect(await outcome(url, { method: 'HEAD' })).to.match(/^SignatureDoesNotMatch/);
    expect(await outcome(url, { region: 'eu-west-1' })).to.match(/^AuthorizationQueryParametersError/);
    expect(await outcome(url)).to.match(/^accepted/);
  });

  it('checks the moment and the unsigned headers of every request to a kept URL', async () => {
    const url = presign('/b/k.bin');
    expect(await outcome(url)).to.match(/^accepted/);
    expect(await outcome(url, { at: new Date(now.getTime() + 601_000) })).to.equal('AccessDenied: Request has expired');
    expect(await outcome(url, { at: new Date(now.getTime() - 16 * 60_000) })).to.equal('AccessDenied: Request is not valid yet');
    expect(await outcome(url, { headers: { host, 'x-amz-copy-source': '/b/other.bin' } })).to.equal(
      'AccessDenied: There were headers present in the request which were not signed',
    );
    expect(await outcome(url, { at: new Date(now.getTime() + 599_000) })).to.match(/^accepted/);
  });

  it('keeps nothing for a refused URL', async () => {
    const url = presign('/b/k.bin');
    const forged = url.replace(/X-Amz-Signature=([0-9a-f])/, (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`);
    expect(await outcome(forged)).to.match(/^SignatureDoesNotMatch/);
    expect(await outcome(forged)).to.match(/^SignatureDoesNotMatch/);
    expect(await outcome(url)).to.match(/^accepted/);
    expect(await outcome(forged)).to.match(/^SignatureDoesNotMatch/);
  });
});
