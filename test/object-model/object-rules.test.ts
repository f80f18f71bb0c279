import { expect } from 'chai';
import {
  checkCopySourceRange,
  checkPartNumber,
  checkPartOrder,
  contentMd5Hex,
  header,
  readConditions,
  readContentMd5,
  readCopySourceRange,
  readInstantMd5,
  readPageSize,
  readPartNumber,
  readWholeNumber,
  readWriteConditions,
  unquoteEtag,
} from '../../images/object-model/src/index.js';
import { s3CodeOf } from '../support/s3-code.js';
import { OWNER_ANSWERS } from '../support/rule-owners.js';

/** The S3 rules every service reads and judges through the object model (issue #41, item 3). */
describe('object model: the one owner of each S3 rule', () => {
  it('part numbers: digits are read, 1 to 10000 are valid; anything else is the same InvalidArgument', () => {
    expect([readPartNumber('1'), readPartNumber('0042'), readPartNumber('10001')]).to.deep.equal([1, 42, 10001]);
    for (const bad of ['', 'abc', '-1', '1.5', ' 1', null, undefined])
      expect(
        s3CodeOf(() => readPartNumber(bad)),
        String(bad),
      ).to.equal('InvalidArgument');
    expect([1, 10000].map((n) => s3CodeOf(() => checkPartNumber(n)))).to.deep.equal(['accepted', 'accepted']);
    expect([0, 10001, 1.5, Number.NaN].map((n) => s3CodeOf(() => checkPartNumber(n)))).to.deep.equal(Array(4).fill('InvalidArgument'));
    expect(OWNER_ANSWERS.partNumberTooHigh()).to.deep.equal({
      status: 400,
      code: 'InvalidArgument',
      message: 'Part number must be an integer between 1 and 10000, inclusive',
      extra: { ArgumentName: 'partNumber', ArgumentValue: '10001' },
    });
  });

  it('part order: at least one part (MalformedXML), valid numbers, strictly ascending (InvalidPartOrder naming the upload)', () => {
    const order = (numbers: number[]) =>
      s3CodeOf(() =>
        checkPartOrder(
          numbers.map((partNumber) => ({ partNumber })),
          'u1',
        ),
      );
    expect([order([1]), order([1, 2, 9]), order([]), order([0]), order([1, 10001]), order([2, 1]), order([1, 1])]).to.deep.equal([
      'accepted',
      'accepted',
      'MalformedXML',
      'InvalidArgument',
      'InvalidArgument',
      'InvalidPartOrder',
      'InvalidPartOrder',
    ]);
    expect(OWNER_ANSWERS.outOfOrder('u1').extra).to.deep.equal({ UploadId: 'u1' });
    expect(s3CodeOf(() => checkPartOrder('no list' as never, 'u1'))).to.equal('MalformedXML');
  });

  it('copy-source range: bytes=first-last is read (InvalidArgument otherwise), and must lie inside the source (InvalidRange)', () => {
    expect(readCopySourceRange(' bytes=0-9 ')).to.deep.equal({ start: 0, end: 9 });
    for (const bad of ['bytes=nonsense', 'bytes=5-', 'bytes=-5', '0-9', 'bytes=0-9,20-29'])
      expect(
        s3CodeOf(() => readCopySourceRange(bad)),
        bad,
      ).to.equal('InvalidArgument');
    expect(OWNER_ANSWERS.copyRangeForm().extra).to.deep.include({ ArgumentName: 'x-amz-copy-source-range' });
    expect(s3CodeOf(() => checkCopySourceRange({ start: 0, end: 9 }, 10))).to.equal('accepted');
    expect(s3CodeOf(() => checkCopySourceRange({ start: 0, end: 10 }, 10))).to.equal('InvalidRange');
    expect(s3CodeOf(() => checkCopySourceRange({ start: 5, end: 4 }, 10))).to.equal('InvalidRange');
  });

  it('page sizes (max-keys, max-uploads, max-parts): a whole number, at most 1000, 1000 when absent', () => {
    expect([readPageSize(undefined, 'max-keys'), readPageSize('', 'max-keys'), readPageSize('0', 'max-keys'), readPageSize('5000', 'max-keys')]).to.deep.equal([
      1000, 1000, 0, 1000,
    ]);
    for (const bad of ['abc', '-1', '1.5'])
      expect(
        s3CodeOf(() => readPageSize(bad, 'max-keys')),
        bad,
      ).to.equal('InvalidArgument');
    expect(OWNER_ANSWERS.maxKeysForm().extra).to.deep.equal({ ArgumentName: 'max-keys', ArgumentValue: 'abc' });
    expect([readWholeNumber(null, 'part-number-marker', 0), readWholeNumber('7', 'part-number-marker', 0)]).to.deep.equal([0, 7]);
  });

  it('Content-MD5: the base64 of 16 bytes (InvalidDigest otherwise, a repeated header too); its hex for the backends', () => {
    const md5 = Buffer.alloc(16, 0xab);
    expect(readContentMd5(md5.toString('base64'))).to.equal(md5.toString('base64'));
    expect(contentMd5Hex(md5.toString('base64'))).to.equal(md5.toString('hex'));
    expect([readContentMd5(undefined), contentMd5Hex(undefined)]).to.deep.equal([undefined, undefined]);
    for (const bad of ['not-base64!', Buffer.alloc(15).toString('base64'), md5.toString('hex'), [md5.toString('base64'), md5.toString('base64')]])
      expect(
        s3CodeOf(() => readContentMd5(bad)),
        String(bad),
      ).to.equal('InvalidDigest');
  });

  it('x-service-md5: 32 hex digits, lower-cased; anything else InvalidDigest', () => {
    expect(readInstantMd5('ABCDEF0123456789abcdef0123456789')).to.equal('abcdef0123456789abcdef0123456789');
    expect(readInstantMd5(undefined)).to.equal(undefined);
    for (const bad of ['', 'xyz', 'abcdef0123456789abcdef012345678', 'g'.repeat(32)])
      expect(
        s3CodeOf(() => readInstantMd5(bad)),
        bad,
      ).to.equal('InvalidDigest');
  });

  it('ETags: quoted, weak, or with space around them, unquote to the bare value', () => {
    for (const form of ['abc-2', '"abc-2"', 'W/"abc-2"', '  "abc-2" ', '"W/"abc-2""']) expect(unquoteEtag(form), form).to.equal('abc-2');
  });

  it('If-* headers: first values read, a copy source by its prefix, none sent reads as undefined', () => {
    const req = { headers: { 'if-match': ['"a"', '"b"'], 'if-modified-since': 'Wed, 04 Mar 2026 05:06:07 GMT', 'x-amz-copy-source-if-none-match': '*' } };
    expect(header(req, 'if-match')).to.equal('"a"');
    expect(readConditions(req)).to.deep.equal({ ifMatch: '"a"', ifModifiedSince: 'Wed, 04 Mar 2026 05:06:07 GMT' });
    expect(readConditions(req, 'x-amz-copy-source-')).to.deep.equal({ ifNoneMatch: '*' });
    expect(readWriteConditions(req)).to.deep.equal({ ifMatch: '"a"' });
    expect([readConditions({ headers: {} }), readWriteConditions({ headers: {} })]).to.deep.equal([undefined, undefined]);
  });
});
