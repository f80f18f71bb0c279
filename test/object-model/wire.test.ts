import { expect } from 'chai';
import {
  encodeWireHeader,
  readWireHeader,
  readWireHeaderLeniently,
  S3Error,
  STORED_HEADERS_HEADER,
  TAGS_HEADER,
  USER_METADATA_HEADER,
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
});
