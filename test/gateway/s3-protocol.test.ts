import { expect } from 'chai';
import { XMLValidator } from 'fast-xml-parser';
import { routeOf, bucketAndKey } from '../../images/gateway/src/s3/router.js';
import { errorXml, parseXml } from '../../images/gateway/src/s3/xml.js';
import { urlEncodeKey } from '../../images/gateway/src/s3/render.js';
import { newRequestId } from '../../images/gateway/src/middleware/request-context.js';
import { assertObjectKey, isValidBucketName, S3Error, S3_ERRORS, type S3ErrorCode } from '../../images/object-model/src/index.js';

const codeOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    return err instanceof S3Error ? err.code : `not an S3Error: ${String(err)}`;
  }
  return 'no error';
};

describe('gateway S3 protocol pieces', () => {
  it('request ids are 16 upper-case hex digits, distinct across many requests (past a refill of their random pool)', () => {
    const ids = Array.from({ length: 2000 }, () => newRequestId());
    for (const id of ids) expect(id).to.match(/^[0-9A-F]{16}$/);
    expect(new Set(ids).size).to.equal(ids.length);
  });

  describe('the one enumeration of S3 errors', () => {
    it('every code renders as a well-formed S3 error document with its status, and survives the internal JSON hop', () => {
      for (const code of Object.keys(S3_ERRORS) as S3ErrorCode[]) {
        const err = new S3Error(code, undefined, { Key: 'a<b>&c' });
        expect(err.status, code).to.equal(S3_ERRORS[code].status);
        expect(err.status, code).to.be.within(300, 599);
        const xml = errorXml(err, '/bucket/a<b>&c', 'req-1');
        expect(XMLValidator.validate(xml), code).to.equal(true);
        expect(xml).to.contain(`<Code>${code}</Code>`).and.contain('<Key>a&lt;b&gt;&amp;c</Key>').and.contain('<RequestId>req-1</RequestId>');
        const back = S3Error.fromJSON(JSON.parse(JSON.stringify(err.toJSON())));
        expect([back.code, back.status, back.message, back.extra], code).to.deep.equal([code, err.status, err.message, { Key: 'a<b>&c' }]);
      }
      const unknown = S3Error.fromJSON({ error: { code: 'NoSuchThing', message: 'x' } });
      expect([unknown.code, unknown.status]).to.deep.equal(['InternalError', 500]);
      expect(S3Error.fromJSON('not json at all').code).to.equal('InternalError');
    });

    it('statuses clients rely on', () => {
      const expected: Partial<Record<S3ErrorCode, number>> = {
        NoSuchBucket: 404,
        NoSuchKey: 404,
        NoSuchUpload: 404,
        BucketNotEmpty: 409,
        BucketAlreadyOwnedByYou: 409,
        InvalidBucketName: 400,
        BadDigest: 400,
        InvalidPart: 400,
        InvalidPartOrder: 400,
        EntityTooSmall: 400,
        EntityTooLarge: 400,
        AccessDenied: 403,
        SignatureDoesNotMatch: 403,
        InvalidRange: 416,
        PreconditionFailed: 412,
        NotImplemented: 501,
        SlowDown: 503,
        ServiceUnavailable: 503,
        MissingContentLength: 411,
      };
      for (const [code, status] of Object.entries(expected)) expect(S3_ERRORS[code as S3ErrorCode].status, code).to.equal(status);
    });
  });

  describe('request routing', () => {
    const op = (method: string, target: string, headers: Record<string, string> = {}) => {
      const [p, q = ''] = target.split('?');
      const { bucket, key } = bucketAndKey(p);
      return routeOf(method, bucket, key, new URLSearchParams(q), headers).operation;
    };

    it('names every supported S3 operation from method, path, subresource and headers', () => {
      const cases: Array<[string, string, Record<string, string>?, string?]> = [
        ['GET', '/', {}, 'ListBuckets'],
        ['PUT', '/b1', {}, 'CreateBucket'],
        ['DELETE', '/b1', {}, 'DeleteBucket'],
        ['HEAD', '/b1', {}, 'HeadBucket'],
        ['GET', '/b1?list-type=2', {}, 'ListObjectsV2'],
        ['GET', '/b1', {}, 'ListObjects'],
        ['GET', '/b1?versions', {}, 'ListObjectVersions'],
        ['GET', '/b1?versioning', {}, 'GetBucketVersioning'],
        ['GET', '/b1?location', {}, 'GetBucketLocation'],
        ['GET', '/b1?acl', {}, 'GetBucketAcl'],
        ['GET', '/b1?uploads', {}, 'ListMultipartUploads'],
        ['POST', '/b1?delete', {}, 'DeleteObjects'],
        ['PUT', '/b1/k', {}, 'PutObject'],
        ['PUT', '/b1/k', { 'x-amz-copy-source': '/b1/src' }, 'CopyObject'],
        ['GET', '/b1/k', {}, 'GetObject'],
        ['HEAD', '/b1/k', {}, 'HeadObject'],
        ['DELETE', '/b1/k', {}, 'DeleteObject'],
        ['GET', '/b1/k?acl', {}, 'GetObjectAcl'],
        ['GET', '/b1/k?tagging', {}, 'GetObjectTagging'],
        ['PUT', '/b1/k?tagging', {}, 'PutObjectTagging'],
        ['PUT', '/b1/k?tagging', { 'x-amz-copy-source': '/b1/src' }, 'PutObjectTagging'],
        ['DELETE', '/b1/k?tagging', {}, 'DeleteObjectTagging'],
        ['GET', '/b1/k?presign&method=PUT', {}, 'Presign'],
        ['POST', '/b1/k?uploads', {}, 'CreateMultipartUpload'],
        ['PUT', '/b1/k?partNumber=1&uploadId=u', {}, 'UploadPart'],
        ['PUT', '/b1/k?partNumber=1&uploadId=u', { 'x-amz-copy-source': '/b1/src' }, 'UploadPartCopy'],
        ['POST', '/b1/k?uploadId=u', {}, 'CompleteMultipartUpload'],
        ['DELETE', '/b1/k?uploadId=u', {}, 'AbortMultipartUpload'],
        ['GET', '/b1/k?uploadId=u', {}, 'ListParts'],
        ['PUT', '/b1?lifecycle', {}, 'PutBucketLifecycleConfiguration'],
        ['GET', '/b1?lifecycle', {}, 'GetBucketLifecycleConfiguration'],
        ['DELETE', '/b1?lifecycle', {}, 'DeleteBucketLifecycle'],
        ['PUT', '/b1?cors', {}, 'PutBucketCors'],
        ['GET', '/b1?cors', {}, 'GetBucketCors'],
        ['DELETE', '/b1?cors', {}, 'DeleteBucketCors'],
        ['PUT', '/b1?tagging', {}, 'PutBucketTagging'],
        ['GET', '/b1?tagging', {}, 'GetBucketTagging'],
        ['DELETE', '/b1?tagging', {}, 'DeleteBucketTagging'],
        ['GET', '/b1?policy', {}, 'GetBucketPolicy'],
        ['GET', '/b1?object-lock', {}, 'GetObjectLockConfiguration'],
        ['GET', '/b1?logging', {}, 'GetBucketLogging'],
      ];
      for (const [method, target, headers, expected] of cases) expect(op(method, target, headers), `${method} ${target}`).to.equal(expected);
    });

    it('versioning, ACL, policy and lock writes are NotImplemented routes, never a write', () => {
      for (const [method, target] of [
        ['PUT', '/b1?versioning'],
        ['PUT', '/b1?acl'],
        ['PUT', '/b1?policy'],
        ['PUT', '/b1?object-lock'],
        ['PUT', '/b1?website'],
        ['PUT', '/b1/k?acl'],
        ['PUT', '/b1/k?retention'],
        ['PUT', '/b1/k?legal-hold'],
        ['POST', '/b1'],
      ]) {
        const name = op(method, target);
        expect(name, `${method} ${target}`).to.match(/^(Unsupported:|PutBucketVersioning$|PutBucketAcl$|PutObjectAcl$|PostBucket$)/);
        expect(name, `${method} ${target}`).not.to.match(/^(CreateBucket|PutObject|DeleteBucket|DeleteObject)$/);
      }
      // Deleting a policy no bucket has is S3's 204 for the owner, never a DeleteBucket.
      expect(op('DELETE', '/b1?policy')).to.equal('DeleteBucketPolicy');
      expect(op('PATCH', '/b1/k')).to.equal('MethodNotAllowed');
      expect(op('DELETE', '/')).to.equal('MethodNotAllowed');
    });

    it('splits path-style targets and decodes each part once', () => {
      expect(bucketAndKey('/b1/dir/a%20file%2Bplus.txt')).to.deep.equal({ bucket: 'b1', key: 'dir/a file+plus.txt' });
      expect(bucketAndKey('/b1/')).to.deep.equal({ bucket: 'b1', key: '' });
      expect(bucketAndKey('/b1/%2525')).to.deep.equal({ bucket: 'b1', key: '%25' });
    });
  });

  describe('names, keys, XML', () => {
    it('bucket names follow S3 rules; keys refuse "..", NUL and > 1024 bytes, and take other control characters', () => {
      for (const good of ['abc', 'my-bucket.2026', 'a'.repeat(63), '0-0']) expect(isValidBucketName(good), good).to.equal(true);
      for (const bad of ['ab', 'a'.repeat(64), 'Upper', 'a_b', 'a..b', '-ab', 'ab-', '.ab', 'a.-b', '10.0.0.1', 'xn--abc', 'abc-s3alias'])
        expect(isValidBucketName(bad), bad).to.equal(false);
      expect(codeOf(() => assertObjectKey('a/../b'))).to.equal('InvalidObjectName');
      expect(codeOf(() => assertObjectKey('..'))).to.equal('InvalidObjectName');
      expect(codeOf(() => assertObjectKey('a\0b'))).to.equal('InvalidObjectName');
      expect(codeOf(() => assertObjectKey('a\u0001b'))).to.equal('no error');
      expect(codeOf(() => assertObjectKey('tab\there\nline\u007f'))).to.equal('no error');
      expect(codeOf(() => assertObjectKey(''))).to.equal('InvalidObjectName');
      expect(codeOf(() => assertObjectKey('é'.repeat(513)))).to.equal('KeyTooLongError');
      expect(codeOf(() => assertObjectKey('a/..b/c..'))).to.equal('no error');
      expect(codeOf(() => assertObjectKey('é'.repeat(512)))).to.equal('no error');
      // A ".." segment anywhere, and only a whole segment.
      for (const bad of ['../a', 'a/..', 'a/../b/..', '/..', '../', 'a//../b'])
        expect(
          codeOf(() => assertObjectKey(bad)),
          bad,
        ).to.equal('InvalidObjectName');
      for (const good of ['...', 'a/.../b', '..a/b', 'a/b..', '.a./..b', 'a/.', './a'])
        expect(
          codeOf(() => assertObjectKey(good)),
          good,
        ).to.equal('no error');
      // Bytes, not UTF-16 units: 1 024 bytes pass, 1 025 fail, whichever characters make them (4-byte ones too).
      expect(codeOf(() => assertObjectKey('a'.repeat(1024)))).to.equal('no error');
      expect(codeOf(() => assertObjectKey('a'.repeat(1025)))).to.equal('KeyTooLongError');
      expect(codeOf(() => assertObjectKey('😀'.repeat(256)))).to.equal('no error');
      expect(codeOf(() => assertObjectKey(`${'😀'.repeat(256)}a`))).to.equal('KeyTooLongError');
      expect(codeOf(() => assertObjectKey(`${'€'.repeat(341)}a`))).to.equal('no error');
      expect(codeOf(() => assertObjectKey(`${'€'.repeat(341)}ab`))).to.equal('KeyTooLongError');
    });

    it('encoding-type=url keeps "/" and encodes everything else a URL would', () => {
      expect(urlEncodeKey('c d/+4&é?#%')).to.equal('c%20d/%2B4%26%C3%A9%3F%23%25');
    });

    it('request XML: malformed, empty or wrong-root documents are MalformedXML; entities are not expanded past the document', () => {
      expect(parseXml<{ Object: Array<{ Key: string }> }>('<Delete><Object><Key>a&amp;b</Key></Object></Delete>', 'Delete').Object[0].Key).to.equal('a&b');
      for (const bad of ['', '   ', '<Delete>', '<Delete><Object></Delete>', '<Other/>', 'not xml'])
        expect(
          codeOf(() => parseXml(bad, 'Delete')),
          JSON.stringify(bad),
        ).to.equal('MalformedXML');
      const xxe = '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><Delete><Object><Key>&x;</Key></Object></Delete>';
      expect(codeOf(() => parseXml(xxe, 'Delete'))).to.equal('MalformedXML');
      const laughs = `<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">${Array.from({ length: 8 }, (_, i) => `<!ENTITY ${'b'.repeat(i + 1)} "${`&${i ? 'b'.repeat(i) : 'a'};`.repeat(10)}">`).join('')}]><Delete><Object><Key>&bbbbbbbb;</Key></Object></Delete>`;
      expect(codeOf(() => parseXml(laughs, 'Delete'))).to.equal('MalformedXML');
    });
  });
});
