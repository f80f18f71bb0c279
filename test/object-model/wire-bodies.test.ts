import { expect } from 'chai';
import {
  readBlobCollectionBody,
  readCompleteMultipartBody,
  readCreateMultipartBody,
  readMultipartExpiryBody,
  readPartCopyBody,
  S3Error,
} from '../../images/object-model/src/index.js';

/** The S3 error code and message a reader throws for `body`, or 'accepted'. */
function refusal(read: (body: unknown) => unknown, body: unknown): string {
  try {
    read(body);
  } catch (err) {
    return err instanceof S3Error ? `${err.code}: ${err.message}` : String(err);
  }
  return 'accepted';
}

describe('object model: the multipart and maintenance bodies of the internal API (zod)', () => {
  it('CreateMultipartUpload: fields kept, the checksum type defaulted from its algorithm, a wrong one refused as S3 does', () => {
    const body = readCreateMultipartBody({
      owner: 'alice',
      contentType: 'text/plain',
      userMetadata: { a: '1' },
      tags: [{ key: 'k', value: 'v' }],
      checksum: { algorithm: 'SHA256' },
    });
    expect(body).to.deep.include({ owner: 'alice', contentType: 'text/plain', userMetadata: { a: '1' }, tags: [{ key: 'k', value: 'v' }] });
    expect(body.checksum).to.deep.equal({ algorithm: 'SHA256', type: 'COMPOSITE' });
    expect(readCreateMultipartBody(undefined).checksum).to.equal(undefined);
    expect(refusal(readCreateMultipartBody, { checksum: { algorithm: 'MD5' } })).to.match(/^InvalidRequest: Value for x-amz-checksum-algorithm/);
    expect(refusal(readCreateMultipartBody, { checksum: { algorithm: 'SHA256', type: 'FULL_OBJECT' } })).to.match(
      /^InvalidRequest: The FULL_OBJECT checksum type/,
    );
    expect(refusal(readCreateMultipartBody, { userMetadata: { a: 1 } })).to.match(/^InvalidArgument: userMetadata is not valid/);
    expect(refusal(readCreateMultipartBody, { tags: [{ key: 'aws:x', value: '' }] })).to.match(/^InvalidTag/);
  });

  it('UploadPartCopy: a source is required; a range and conditions are kept when they are text', () => {
    expect(readPartCopyBody({ sourceBucket: 'b', sourceKey: 'k', range: 'bytes=0-9', conditions: { ifMatch: '"e"', ifNoneMatch: 3 } })).to.deep.equal({
      sourceBucket: 'b',
      sourceKey: 'k',
      range: 'bytes=0-9',
      conditions: { ifMatch: '"e"' },
    });
    expect(refusal(readPartCopyBody, { sourceKey: 'k' })).to.equal('InvalidArgument: sourceBucket and sourceKey are required');
    expect(refusal(readPartCopyBody, null)).to.equal('InvalidArgument: sourceBucket and sourceKey are required');
  });

  it('CompleteMultipartUpload: parts read as numbers and ETags with their checksums; parts that are no list are left for the upload to judge', () => {
    const body = readCompleteMultipartBody({
      parts: [{ partNumber: '2', etag: '"x"', checksum: { algorithm: 'CRC32', value: 'AAAAAA==' } }, { partNumber: 3 }],
      conditions: { ifNoneMatch: '*' },
    });
    expect(body.parts).to.deep.equal([
      { partNumber: 2, etag: '"x"', checksum: { algorithm: 'CRC32', value: 'AAAAAA==' } },
      { partNumber: 3, etag: '', checksum: undefined },
    ]);
    expect(body.conditions).to.deep.equal({ ifNoneMatch: '*' });
    expect(body.checksum).to.equal(undefined);
    expect(readCompleteMultipartBody({ parts: 'none' }).parts).to.equal('none');
  });

  it('the lifecycle expiry and the blob collection: their fields checked, InvalidArgument otherwise', () => {
    const expiry = readMultipartExpiryBody({ prefix: null, initiatedNoLaterThan: '2026-01-01T00:00:00Z' });
    expect(expiry.prefix).to.equal('');
    expect(expiry.initiatedNoLaterThan.toISOString()).to.equal('2026-01-01T00:00:00.000Z');
    expect(refusal(readMultipartExpiryBody, { prefix: 'p/', initiatedNoLaterThan: 'yesterday' })).to.match(
      /^InvalidArgument: prefix \(a string\) and initiatedNoLaterThan/,
    );
    expect(refusal(readMultipartExpiryBody, { prefix: 5, initiatedNoLaterThan: '2026-01-01T00:00:00Z' })).to.match(/^InvalidArgument: prefix \(a string\)/);
    expect(readBlobCollectionBody({ blobIds: [1, 2] }).blobIds).to.deep.equal([1, 2]);
    expect(readBlobCollectionBody({}).blobIds).to.equal(undefined);
    expect(refusal(readBlobCollectionBody, { blobIds: [1.5] })).to.equal('InvalidArgument: blobIds must be a list of integers');
    expect(refusal(readBlobCollectionBody, { blobIds: 'all' })).to.equal('InvalidArgument: blobIds must be a list of integers');
  });
});
