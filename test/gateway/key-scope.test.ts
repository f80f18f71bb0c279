import { expect } from 'chai';
import { parseKeyScope, S3Error, type KeyScope } from '../../images/object-model/src/index.js';
import { enforceKeyScope } from '../../images/gateway/src/auth/key-scope.js';
import type { Caller } from '../../images/gateway/src/context.js';

const scope: KeyScope = {
  access: 'read',
  resources: [
    { bucket: 'photos', prefix: 'img/' },
    { bucket: 'models', prefix: '' },
  ],
};
const reader: Caller = { username: 'strata', accessKey: 'AK', isRoot: false, via: 'sigv4', scope };

/** The S3 error code enforceKeyScope throws, or 'allowed'. */
function decide(caller: Caller | undefined, operation: string, bucket: string, key = '', prefix: string | null = null): string {
  try {
    enforceKeyScope(caller, operation, bucket, key, prefix);
    return 'allowed';
  } catch (err) {
    return err instanceof S3Error ? err.code : String(err);
  }
}

describe('gateway: what a scoped access key may do (auth/key-scope.ts)', () => {
  it('allows object reads under a prefix of the bucket, listings under it, and reads of the bucket itself', () => {
    for (const op of ['GetObject', 'HeadObject', 'GetObjectAcl', 'GetObjectTagging', 'GetObjectAttributes'])
      expect(decide(reader, op, 'photos', 'img/a.jpg'), op).to.equal('allowed');
    for (const op of ['ListObjects', 'ListObjectsV2', 'ListObjectVersions']) {
      expect(decide(reader, op, 'photos', '', 'img/'), op).to.equal('allowed');
      expect(decide(reader, op, 'photos', '', 'img/2026/'), op).to.equal('allowed');
      expect(decide(reader, op, 'models', '', null), op).to.equal('allowed');
    }
    for (const op of [
      'HeadBucket',
      'GetBucketLocation',
      'GetBucketAcl',
      'GetPublicAccessBlock',
      'GetBucketOwnershipControls',
      'GetBucketPolicy',
      'GetBucketLogging',
    ])
      expect(decide(reader, op, 'photos'), op).to.equal('allowed');
    expect(decide(reader, 'ListBuckets', '')).to.equal('allowed');
  });

  it('refuses writes, other buckets, other prefixes, listings outside the prefix, and everything it does not name', () => {
    const refused: Array<[string, string, string?, string?]> = [
      ['PutObject', 'photos', 'img/a.jpg'],
      ['DeleteObject', 'photos', 'img/a.jpg'],
      ['CopyObject', 'photos', 'img/b.jpg'],
      ['PutObjectAcl', 'photos', 'img/a.jpg'],
      ['PutObjectTagging', 'photos', 'img/a.jpg'],
      ['CreateMultipartUpload', 'photos', 'img/a.jpg'],
      ['UploadPart', 'photos', 'img/a.jpg'],
      ['ListParts', 'photos', 'img/a.jpg'],
      ['Presign', 'photos', 'img/a.jpg'],
      ['PostObject', 'photos'],
      ['DeleteObjects', 'photos'],
      ['CreateBucket', 'photos'],
      ['CreateBucket', 'fresh'],
      ['DeleteBucket', 'photos'],
      ['PutBucketAcl', 'photos'],
      ['PutBucketCors', 'photos'],
      ['PutBucketLogging', 'photos'],
      ['PutPublicAccessBlock', 'photos'],
      ['DeleteBucketOwnershipControls', 'photos'],
      ['ListMultipartUploads', 'photos'],
      ['GetObject', 'photos', 'secret/a.jpg'],
      ['GetObject', 'photos', 'img'],
      ['GetObject', 'other', 'img/a.jpg'],
      ['HeadBucket', 'other'],
      ['MethodNotAllowed', ''],
    ];
    for (const [op, bucket, key] of refused) expect(decide(reader, op, bucket, key ?? ''), `${op} ${bucket}/${key ?? ''}`).to.equal('AccessDenied');
    expect(decide(reader, 'ListObjectsV2', 'photos', '', null)).to.equal('AccessDenied');
    expect(decide(reader, 'ListObjectsV2', 'photos', '', 'im')).to.equal('AccessDenied');
    expect(decide(reader, 'ListObjects', 'photos', '', 'secret/')).to.equal('AccessDenied');
  });

  it('leaves callers without a scope (a user’s own key, anonymous) to the usual rules', () => {
    const { scope: _none, ...user } = reader;
    expect(decide(user, 'PutObject', 'photos', 'secret/a.jpg')).to.equal('allowed');
    expect(decide(undefined, 'DeleteBucket', 'photos')).to.equal('allowed');
  });

  it('parses the scopes POST /admin/access-keys takes, and refuses anything but read-only bucket names', () => {
    expect(parseKeyScope({ buckets: ['photos', 'models'], prefix: 'img/' })).to.deep.equal({
      access: 'read',
      resources: [
        { bucket: 'photos', prefix: 'img/' },
        { bucket: 'models', prefix: 'img/' },
      ],
    });
    expect(parseKeyScope({ resources: [{ bucket: 'photos' }] })).to.deep.equal({ access: 'read', resources: [{ bucket: 'photos', prefix: '' }] });
    for (const bad of [
      {},
      { buckets: [] },
      { buckets: 'photos' },
      { buckets: ['Bad_Name'] },
      { buckets: ['photos'], access: 'write' },
      { buckets: ['photos'], resources: [{ bucket: 'photos' }] },
      { resources: [{ bucket: 'photos', prefix: 7 }] },
      { buckets: Array.from({ length: 17 }, (_, i) => `bucket-${i}`) },
    ])
      expect(() => parseKeyScope(bad), JSON.stringify(bad)).to.throw(S3Error);
  });
});
