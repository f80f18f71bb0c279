import { expect } from 'chai';
import { parseAmzDate, presignUrl, toAmzDate } from '../../images/gateway/src/auth/sigv4.js';
import { parseCredential, verifySigV4, type Credential } from '../../images/gateway/src/auth/sigv4-verify.js';
import { S3Error } from '../../images/object-model/src/index.js';

/**
 * Verification reads a presigned query once for URLs that share it but their signature (sigv4-verify.ts,
 * readQuery): what it keeps is text, never a verdict. Each request is still checked over its own
 * method, path, query, headers and signature.
 */
describe('gateway: SigV4 verification of presigned URLs that share their query', () => {
  const now = new Date('2026-12-05T10:00:00Z');
  const origin = 'http://127.0.0.1:9000';
  const cred: Credential = { username: 'alice', accessKey: 'AKALICE', secretKey: 'alice-secret-0123456789' };
  const lookup = async (accessKey: string): Promise<Credential> => {
    if (accessKey !== cred.accessKey) throw new S3Error('InvalidAccessKeyId');
    return cred;
  };
  const presign = (path: string, method = 'GET', extraQuery?: Array<[string, string]>) =>
    presignUrl({ method, origin, path, accessKey: cred.accessKey, secret: cred.secretKey, region: 'us-east-1', expiresSeconds: 600, now, extraQuery }).slice(
      origin.length,
    );
  const verify = (url: string, method = 'GET') => verifySigV4({ method, url, headers: { host: '127.0.0.1:9000' } }, lookup, { region: 'us-east-1', now });
  const refusal = async (url: string, method = 'GET') => {
    try {
      await verify(url, method);
    } catch (err) {
      return (err as S3Error).code;
    }
    return 'accepted';
  };
  const signatureOf = (url: string) => /X-Amz-Signature=([0-9a-f]+)/.exec(url)![1]!;

  it('accepts each URL of a batch and refuses one URL signature on another path, method or query, before and after', async () => {
    const a = presign('/b/a.bin');
    const b = presign('/b/b.bin');
    const swapped = a.replace(signatureOf(a), signatureOf(b));
    expect(await refusal(swapped)).to.equal('SignatureDoesNotMatch');
    expect((await verify(a)).credential.username).to.equal('alice');
    expect((await verify(b)).credential.username).to.equal('alice');
    expect(await refusal(swapped)).to.equal('SignatureDoesNotMatch');
    expect(await refusal(a, 'PUT')).to.equal('SignatureDoesNotMatch');
    expect(await refusal(a.replace(/.$/, (c) => (c === '0' ? '1' : '0')))).to.equal('SignatureDoesNotMatch');
    expect(await refusal(a.replace('X-Amz-Expires=600', 'X-Amz-Expires=601'))).to.equal('SignatureDoesNotMatch');
    expect(await refusal(`${a}&extra=1`)).to.equal('SignatureDoesNotMatch');
    expect((await verify(a)).credential.username).to.equal('alice');
  });

  it('finds the signature anywhere in the query, and reads a query with a second signature pair whole', async () => {
    const url = presign('/b/k.bin', 'GET', [['response-content-type', 'text/plain']]);
    const [path, query] = url.split('?') as [string, string];
    const pairs = query.split('&');
    const signature = pairs.find((p) => p.startsWith('X-Amz-Signature='))!;
    const moved = `${path}?${[signature, ...pairs.filter((p) => p !== signature)].join('&')}`;
    expect(await refusal(moved)).to.equal('accepted');
    expect(
      await refusal(`${path}?${[...pairs.filter((p) => p !== signature).slice(0, 2), signature, ...pairs.filter((p) => p !== signature).slice(2)].join('&')}`),
    ).to.equal('accepted');
    // The first pair named X-Amz-Signature (once decoded) is the signature; every such pair is left out of what is signed.
    expect(await refusal(`${url}&X-Amz-Signatur%65=${'0'.repeat(64)}`)).to.equal('accepted');
    expect(await refusal(`${path}?X-Amz-Signatur%65=${'0'.repeat(64)}&${query}`)).to.equal('SignatureDoesNotMatch');
    expect(await refusal(`${url}&X-Amz-Signature=${'0'.repeat(64)}`)).to.equal('accepted');
  });

  it('reads a date or credential the same after the text read before it: a malformed one is still refused', () => {
    expect(parseAmzDate('20261205T100000Z')?.toISOString()).to.equal('2026-12-05T10:00:00.000Z');
    expect(parseAmzDate('20261205T100000Z')?.toISOString()).to.equal('2026-12-05T10:00:00.000Z');
    for (const bad of ['', '20261205T1000Z', 'soon']) expect(parseAmzDate(bad), bad).to.equal(undefined);
    expect(toAmzDate(new Date('2026-12-05T10:00:00.900Z'))).to.equal('20261205T100000Z');
    expect(toAmzDate(new Date('2026-12-05T10:00:01Z'))).to.equal('20261205T100001Z');
    expect(parseCredential('AK/20261205/us-east-1/s3/aws4_request')).to.deep.include({ accessKey: 'AK', region: 'us-east-1' });
    expect(parseCredential('AK/20261205/us-east-1/s3/aws4_request').scope).to.equal('20261205/us-east-1/s3/aws4_request');
    for (const bad of ['', 'AK/20261205/us-east-1/s3']) expect(() => parseCredential(bad), bad).to.throw(S3Error);
    expect(parseCredential('BK/20261206/eu-west-1/s3/aws4_request')).to.deep.include({ accessKey: 'BK', date: '20261206', region: 'eu-west-1' });
  });
});
