import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { isSigV2Query, verifySigV2 } from '../../images/gateway/src/auth/sigv2.js';
import type { Credential } from '../../images/gateway/src/auth/sigv4-verify.js';
import { S3Error } from '../../images/object-model/src/index.js';

// The worked examples of the S3 documentation ("Signing and authenticating REST requests", AWS signature version 2).
const AK = 'AKIAIOSFODNN7EXAMPLE';
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const lookup = async (accessKey: string): Promise<Credential> => {
  if (accessKey !== AK) throw new S3Error('InvalidAccessKeyId');
  return { username: 'example', accessKey: AK, secretKey: SECRET };
};
const at = (iso: string) => ({ now: new Date(iso) });

/** The signer, written from the documentation: base64(HMAC-SHA1(secret, StringToSign)). */
function signV2(stringToSign: string, secret = SECRET): string {
  return createHmac('sha1', secret).update(stringToSign, 'utf8').digest('base64');
}

async function failure(p: Promise<unknown>): Promise<S3Error> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(S3Error);
    return err as S3Error;
  }
  throw new Error('expected a rejection');
}

type Headers = Record<string, string | string[]>;
const request = (method: string, url: string, headers: Headers) => ({ method, url, headers });

describe('gateway SigV2', () => {
  it('accepts the documented GET and DELETE (x-amz-date: empty Date line) header signatures', async () => {
    const get = request('GET', '/johnsmith/photos/puppy.jpg', {
      host: 'johnsmith.s3.amazonaws.com',
      date: 'Tue, 27 Mar 2007 19:36:42 +0000',
      authorization: `AWS ${AK}:bWq2s1WEIj+Ydj0vQ697zp+IXMU=`,
    });
    expect((await verifySigV2(get, lookup, at('2007-03-27T19:40:00Z'))).username).to.equal('example');
    const del = request('DELETE', '/johnsmith/photos/puppy.jpg', {
      host: 's3.amazonaws.com',
      'user-agent': 'dotnet',
      date: 'Tue, 27 Mar 2007 21:20:27 +0000',
      'x-amz-date': 'Tue, 27 Mar 2007 21:20:26 +0000',
      authorization: `AWS ${AK}:R4dJ53KECjStyBO5iTBJZ4XVOaI=`,
    });
    expect((await verifySigV2(del, lookup, at('2007-03-27T21:20:30Z'))).username).to.equal('example');
  });

  it('accepts the documented upload: Content-MD5, Content-Type, x-amz-* headers lower-cased, sorted, repeated ones joined', async () => {
    const put = request('PUT', '/static.example.com/db-backup.dat.gz', {
      host: 'static.example.com:8080',
      date: 'Tue, 27 Mar 2007 21:06:08 +0000',
      'x-amz-acl': 'public-read',
      'content-type': 'application/x-download',
      'content-md5': '4gJE4saaMU4BqNR0kLY+lw==',
      'x-amz-meta-reviewedby': ['joe@example.com', 'jane@example.com'],
      'x-amz-meta-filechecksum': '0x02661779',
      'x-amz-meta-checksumalgorithm': 'crc32',
      'content-disposition': 'attachment; filename=database.dat',
      'content-encoding': 'gzip',
      authorization: `AWS ${AK}:jtBQa0Aq+DkULFI8qrpwIjGEx0E=`,
    });
    expect((await verifySigV2(put, lookup, at('2007-03-27T21:06:08Z'))).username).to.equal('example');
  });

  it('accepts the documented presigned query (Expires in place of Date) and refuses it once expired', async () => {
    const url = `/johnsmith/photos/puppy.jpg?AWSAccessKeyId=${AK}&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D`;
    const presigned = request('GET', url, { host: 'johnsmith.s3.amazonaws.com' });
    expect((await verifySigV2(presigned, lookup, at('2007-03-29T03:00:00Z'))).username).to.equal('example');
    const expired = await failure(verifySigV2(presigned, lookup, at('2007-03-29T03:40:21Z')));
    expect([expired.code, expired.status, expired.message, expired.extra.Expires]).to.deep.equal([
      'AccessDenied',
      403,
      'Request has expired',
      '2007-03-29T03:40:20.000Z',
    ]);
    for (const partial of [url.replace(/&Expires=\d+/, ''), url.replace(/&Signature=[^&]+/, ''), url.replace(/AWSAccessKeyId=[^&]+&/, '')]) {
      const missing = await failure(verifySigV2(request('GET', partial, {}), lookup, at('2007-03-29T03:00:00Z')));
      expect([missing.code, missing.message], partial).to.deep.equal([
        'AccessDenied',
        'Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters',
      ]);
    }
    const badExpires = await failure(verifySigV2(request('GET', url.replace('1175139620', 'soon'), {}), lookup, at('2007-03-29T03:00:00Z')));
    expect([badExpires.code, badExpires.message]).to.deep.equal(['AccessDenied', 'Invalid date (should be seconds since epoch): soon']);
  });

  it("signs S3's subresources (sorted, values decoded) and no other query parameter", async () => {
    const date = 'Tue, 27 Mar 2007 19:44:46 +0000';
    const now = at('2007-03-27T19:44:46Z');
    const signed = async (url: string, resource: string) => {
      const sig = signV2(`GET\n\n\n${date}\n${resource}`);
      return verifySigV2(request('GET', url, { date, authorization: `AWS ${AK}:${sig}` }), lookup, now);
    };
    await signed('/johnsmith/?acl', '/johnsmith/?acl');
    await signed('/johnsmith/big?partNumber=2&uploadId=abc%2Fdef', '/johnsmith/big?partNumber=2&uploadId=abc/def');
    await signed('/johnsmith/big?uploadId=abc&partNumber=2', '/johnsmith/big?partNumber=2&uploadId=abc');
    await signed('/johnsmith?prefix=photos&max-keys=50&list-type=2', '/johnsmith');
    await signed('/johnsmith/a?response-content-type=text%2Fplain&x-id=GetObject', '/johnsmith/a?response-content-type=text/plain');
    await signed('/johnsmith?delete', '/johnsmith?delete');
    await signed('/johnsmith?tagging', '/johnsmith?tagging');
    await signed('/johnsmith/a?versionId=v1&tagging', '/johnsmith/a?tagging&versionId=v1');
    // Clients that sign a value as sent (s3cmd) are answered too.
    await signed('/johnsmith/a?response-content-type=text%2Fplain', '/johnsmith/a?response-content-type=text%2Fplain');
    // A key spelled with escapes is signed as sent, or decoded and encoded once.
    await signed('/johnsmith/my%20photo.jpg', '/johnsmith/my%20photo.jpg');
    // An unsigned subresource changes the request: refused.
    const err = await failure(signed('/johnsmith/a?acl', '/johnsmith/a'));
    expect(err.code).to.equal('SignatureDoesNotMatch');
  });

  it('SignatureDoesNotMatch gives the StringToSign (text and bytes) and the signature provided, as S3 does', async () => {
    const headers = {
      date: 'Tue, 27 Mar 2007 19:36:42 +0000',
      'content-type': 'text/plain',
      'x-amz-meta-colour': 'blue',
      authorization: `AWS ${AK}:bWq2s1WEIj+Ydj0vQ697zp+IXMU=`,
    };
    const err = await failure(verifySigV2(request('PUT', '/johnsmith/photos/puppy.jpg', headers), lookup, at('2007-03-27T19:36:42Z')));
    const expected = 'PUT\n\ntext/plain\nTue, 27 Mar 2007 19:36:42 +0000\nx-amz-meta-colour:blue\n/johnsmith/photos/puppy.jpg';
    expect([err.code, err.status]).to.deep.equal(['SignatureDoesNotMatch', 403]);
    expect(err.extra).to.deep.equal({
      AWSAccessKeyId: AK,
      StringToSign: expected,
      SignatureProvided: 'bWq2s1WEIj+Ydj0vQ697zp+IXMU=',
      StringToSignBytes: [...Buffer.from(expected)].map((b) => b.toString(16).padStart(2, '0')).join(' '),
    });
    // Signed the same string, the request passes.
    const good = { ...headers, authorization: `AWS ${AK}:${signV2(expected)}` };
    expect((await verifySigV2(request('PUT', '/johnsmith/photos/puppy.jpg', good), lookup, at('2007-03-27T19:36:42Z'))).username).to.equal('example');
    // Another secret, or a header changed after signing: refused.
    const other = { ...headers, authorization: `AWS ${AK}:${signV2(expected, 'another')}` };
    expect((await failure(verifySigV2(request('PUT', '/johnsmith/photos/puppy.jpg', other), lookup, at('2007-03-27T19:36:42Z')))).code).to.equal(
      'SignatureDoesNotMatch',
    );
    const changed = { ...good, 'x-amz-meta-colour': 'red' };
    expect((await failure(verifySigV2(request('PUT', '/johnsmith/photos/puppy.jpg', changed), lookup, at('2007-03-27T19:36:42Z')))).code).to.equal(
      'SignatureDoesNotMatch',
    );
  });

  it('refuses an unknown key, a skewed clock (15 min), no date, a malformed header and unsigned x-service-* headers', async () => {
    const date = 'Tue, 27 Mar 2007 19:36:42 +0000';
    const good = { host: 'johnsmith.s3.amazonaws.com', date, authorization: `AWS ${AK}:bWq2s1WEIj+Ydj0vQ697zp+IXMU=` };
    const get = (headers: Headers, now = '2007-03-27T19:36:42Z') => verifySigV2(request('GET', '/johnsmith/photos/puppy.jpg', headers), lookup, at(now));
    expect((await failure(get({ ...good, authorization: 'AWS NOPE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=' }))).code).to.equal('InvalidAccessKeyId');
    await get(good, '2007-03-27T19:51:41Z');
    const skew = await failure(get(good, '2007-03-27T19:51:43Z'));
    expect([skew.code, skew.status, skew.extra.RequestTime, skew.extra.MaxAllowedSkewMilliseconds]).to.deep.equal([
      'RequestTimeTooSkewed',
      403,
      date,
      '900000',
    ]);
    const early = await failure(get(good, '2007-03-27T19:21:41Z'));
    expect(early.code).to.equal('RequestTimeTooSkewed');
    const undated = await failure(get({ host: good.host, authorization: good.authorization }));
    expect([undated.code, undated.message]).to.deep.equal(['AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header']);
    // An x-amz-date sent empty is the date (not the Date header behind it); a date before the epoch is none.
    for (const headers of [
      { ...good, 'x-amz-date': '' },
      { ...good, date: 'Tue, 07 Jul 1950 21:53:04 GMT' },
      { ...good, 'x-amz-date': 'Tue, 07 Jul 1950 21:53:04 GMT' },
    ]) {
      const invalid = await failure(get(headers));
      expect([invalid.code, invalid.message], JSON.stringify(headers)).to.deep.equal([
        'AccessDenied',
        'AWS authentication requires a valid Date or x-amz-date header',
      ]);
    }
    for (const authorization of ['AWS ', `AWS ${AK}`, `AWS ${AK}:`, 'AWS :sig']) {
      const malformed = await failure(get({ ...good, authorization }));
      expect([malformed.code, malformed.status], authorization).to.deep.equal(['InvalidArgument', 400]);
    }
    const service = await failure(get({ ...good, 'x-service-md5': 'abc' }));
    expect([service.code, service.extra.HeadersNotSigned]).to.deep.equal(['AccessDenied', 'x-service-md5']);
  });

  it('tells a SigV2 presigned query from a SigV4 one', () => {
    expect(isSigV2Query(`AWSAccessKeyId=${AK}&Expires=1&Signature=x`)).to.equal(true);
    expect(isSigV2Query('Signature=x')).to.equal(true);
    expect(isSigV2Query('X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc')).to.equal(false);
    expect(isSigV2Query('prefix=Signature%3D&list-type=2')).to.equal(false);
    expect(isSigV2Query('')).to.equal(false);
    // Names as S3 reads them: escapes decoded, a name without a value, never a longer or shorter name.
    expect(isSigV2Query('X-Amz-Signature=abc&%53ignature=x')).to.equal(true);
    expect(isSigV2Query('X-Amz-Signature=abc&Signature')).to.equal(true);
    expect(isSigV2Query('Expires=1&AWSAccessKeyId')).to.equal(true);
    expect(isSigV2Query('X-Amz-Credential=a%2Fb&Signatures=x&xSignature=1&AWSAccessKeyIds=2&X-Amz-Signature=abc')).to.equal(false);
    expect(isSigV2Query('X-Amz-Signature=abc&Signature%ZZ=1&')).to.equal(false);
  });
});
