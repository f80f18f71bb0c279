import { expect } from 'chai';
import {
  encodeWireHeader,
  NAMED_CHECKSUM_BODY,
  OBJECT_CONDITIONS_BODY,
  readCopyObjectBody,
  readWireHeader,
  readWireHeaderLeniently,
  S3Error,
  STORED_HEADERS_HEADER,
  TAGS_HEADER,
  USER_METADATA_HEADER,
  WRITE_CONDITIONS_BODY,
} from '../../images/object-model/src/index.js';

describe('object model: the x-strata-* wire headers', () => {
  const codeOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err instanceof S3Error ? err.code : String(err);
    }
    return 'accepted';
  };

  it('what the gateway writes the data plane reads back unchanged, in ASCII (non-Latin-1 text included)', () => {
    const meta = { colour: 'blüe', note: '猫' };
    const encoded = encodeWireHeader(USER_METADATA_HEADER, meta);
    expect(encoded).to.match(/^[\x20-\x7e]+$/);
    expect(readWireHeader(USER_METADATA_HEADER, encoded)).to.deep.equal(meta);
    const tags = [{ key: 'team', value: 'wéb' }];
    expect(readWireHeader(TAGS_HEADER, encodeWireHeader(TAGS_HEADER, tags))).to.deep.equal(tags);
    const headers = { 'cache-control': 'no-cache' };
    expect(readWireHeader(STORED_HEADERS_HEADER, encodeWireHeader(STORED_HEADERS_HEADER, headers))).to.deep.equal(headers);
  });

  it('absent or empty is undefined; user metadata names are lower-cased; an empty set of stored headers is none', () => {
    expect(readWireHeader(USER_METADATA_HEADER, undefined)).to.equal(undefined);
    expect(readWireHeader(TAGS_HEADER, '')).to.equal(undefined);
    expect(readWireHeader(USER_METADATA_HEADER, '{"Colour":"blue"}')).to.deep.equal({ colour: 'blue' });
    expect(readWireHeader(STORED_HEADERS_HEADER, '{}')).to.equal(undefined);
  });

  it("a value that is not the header's shape is its S3 error; the rules of what it carries still apply", () => {
    expect(codeOf(() => readWireHeader(USER_METADATA_HEADER, '{oops'))).to.equal('InvalidArgument');
    expect(codeOf(() => readWireHeader(USER_METADATA_HEADER, '["a"]'))).to.equal('InvalidArgument');
    expect(codeOf(() => readWireHeader(USER_METADATA_HEADER, '{"n":1}'))).to.equal('InvalidArgument');
    expect(codeOf(() => readWireHeader(TAGS_HEADER, '{"key":"k"}'))).to.equal('InvalidTag');
    expect(codeOf(() => readWireHeader(TAGS_HEADER, '[{"key":"aws:k","value":"v"}]'))).to.equal('InvalidTag');
    expect(codeOf(() => readWireHeader(STORED_HEADERS_HEADER, '{"x-amz-website-redirect-location":"ftp://x"}'))).to.equal('InvalidRedirectLocation');
    expect(readWireHeaderLeniently(TAGS_HEADER, 'not json')).to.equal(undefined);
  });

  it('conditions and checksums in internal JSON bodies: the string-valued fields kept, none when there are none', () => {
    expect(OBJECT_CONDITIONS_BODY.parse({ ifMatch: '"e"', ifModifiedSince: 'Wed, 04 Mar 2026 05:06:07 GMT', ifNoneMatch: 7, other: 'x' })).to.deep.equal({
      ifMatch: '"e"',
      ifModifiedSince: 'Wed, 04 Mar 2026 05:06:07 GMT',
    });
    for (const none of [undefined, null, 'text', {}, { ifMatch: 1 }]) expect(OBJECT_CONDITIONS_BODY.parse(none), JSON.stringify(none)).to.equal(undefined);
    expect(WRITE_CONDITIONS_BODY.parse({ ifNoneMatch: '*', ifModifiedSince: 'x' })).to.deep.equal({ ifNoneMatch: '*' });
    expect(NAMED_CHECKSUM_BODY.parse({ algorithm: 'CRC32', value: 'AAAAAA==' })).to.deep.equal({ algorithm: 'CRC32', value: 'AAAAAA==' });
    expect(NAMED_CHECKSUM_BODY.parse({ algorithm: 'CRC32' })).to.equal(undefined);
  });

  it('a CopyObject body: checked fields kept, each wrong field its S3 error with its argument name', () => {
    const source = { owner: 'bob', sourceBucket: 'b', sourceKey: 'k' };
    const body = { ...source, metadataDirective: 'REPLACE', userMetadata: { a: '1' }, checksumAlgorithm: 'CRC32', conditions: { ifMatch: '"e"' } };
    expect(readCopyObjectBody(structuredClone(body))).to.deep.include(body);
    const failure = (body: unknown) => {
      try {
        readCopyObjectBody(body);
      } catch (err) {
        return err instanceof S3Error ? [err.code, err.extra?.ArgumentName] : [String(err)];
      }
      return ['accepted'];
    };
    expect(failure({ sourceKey: 'k' })).to.deep.equal(['InvalidArgument', undefined]);
    expect(failure({ sourceBucket: 'b', sourceKey: 'k', metadataDirective: 'MOVE' })).to.deep.equal(['InvalidArgument', 'x-amz-metadata-directive']);
    expect(failure({ sourceBucket: 'b', sourceKey: 'k', taggingDirective: 'copy' })).to.deep.equal(['InvalidArgument', 'x-amz-tagging-directive']);
    expect(failure({ sourceBucket: 'b', sourceKey: 'k', checksumAlgorithm: 'MD5' })).to.deep.equal(['InvalidRequest', undefined]);
    expect(failure({ sourceBucket: 'b', sourceKey: 'k', tags: [{ key: 'aws:x', value: '' }] })).to.deep.equal(['InvalidTag', undefined]);
    expect(failure(null)).to.deep.equal(['InvalidArgument', undefined]);
  });
});
