import { expect } from 'chai';
import {
  checksumHeaders,
  copiedHeaders,
  mergeStoredHeaders,
  S3Error,
  standardHeadersOf,
  storedChecksum,
  storedHeadersFromJson,
  withoutChecksum,
} from '../../images/object-model/src/index.js';

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    return err instanceof S3Error ? err.code : `not an S3Error: ${String(err)}`;
  }
  return undefined;
};

describe('service kit: headers stored with objects', () => {
  it('takes the standard headers from request headers or form fields, in any case, and nothing else', () => {
    const picked = standardHeadersOf(
      Object.entries({
        'Cache-Control': 'max-age=60',
        'content-disposition': 'inline',
        'CONTENT-LANGUAGE': 'en',
        Expires: 'Wed, 21 Oct 2030 07:28:00 GMT',
        'content-type': 'text/plain',
        'x-amz-meta-a': 'b',
        authorization: 'secret',
      }),
    );
    expect(picked).to.deep.equal({
      'cache-control': 'max-age=60',
      'content-disposition': 'inline',
      'content-language': 'en',
      expires: 'Wed, 21 Oct 2030 07:28:00 GMT',
    });
    expect(
      standardHeadersOf([
        ['content-type', 'x'],
        ['cache-control', undefined],
      ]),
    ).to.equal(undefined);
  });

  it('leaves the upload framing (aws-chunked) out of Content-Encoding, and the header out when nothing else is left', () => {
    expect(standardHeadersOf([['content-encoding', 'aws-chunked,gzip']])).to.deep.equal({ 'content-encoding': 'gzip' });
    expect(standardHeadersOf([['content-encoding', 'gzip, AWS-CHUNKED']])).to.deep.equal({ 'content-encoding': 'gzip' });
    expect(standardHeadersOf([['content-encoding', 'aws-chunked']])).to.equal(undefined);
  });

  it('refuses values no HTTP answer could carry (control characters, beyond Latin-1) and oversized sets', () => {
    expect(codeOf(() => standardHeadersOf([['content-disposition', 'attachment; filename="東京.txt"']]))).to.equal('InvalidArgument');
    expect(codeOf(() => standardHeadersOf([['cache-control', 'a\r\nx-injected: 1']]))).to.equal('InvalidArgument');
    expect(codeOf(() => standardHeadersOf([['cache-control', 'x'.repeat(9000)]]))).to.equal('InvalidArgument');
    expect(standardHeadersOf([['content-disposition', 'attachment; filename="caf\u00e9.txt"']])).to.deep.equal({
      'content-disposition': 'attachment; filename="caf\u00e9.txt"',
    });
  });

  it('keeps a checksum as its header and type, finds it again and leaves it out on request', () => {
    const stored = mergeStoredHeaders({ 'cache-control': 'no-cache' }, checksumHeaders({ algorithm: 'CRC64NVME', value: 'AAAAAAAAAAA=', type: 'FULL_OBJECT' }));
    expect(stored).to.deep.equal({ 'cache-control': 'no-cache', 'x-amz-checksum-crc64nvme': 'AAAAAAAAAAA=', 'x-amz-checksum-type': 'FULL_OBJECT' });
    expect(storedChecksum(stored)).to.deep.equal({ algorithm: 'CRC64NVME', value: 'AAAAAAAAAAA=', type: 'FULL_OBJECT' });
    expect(withoutChecksum(stored)).to.deep.equal({ 'cache-control': 'no-cache' });
    expect(withoutChecksum(checksumHeaders({ algorithm: 'SHA1', value: 'x', type: 'COMPOSITE' }))).to.equal(undefined);
    expect(storedChecksum({ 'cache-control': 'no-cache' })).to.equal(undefined);
    expect(mergeStoredHeaders(undefined, {})).to.equal(undefined);
  });

  it('checks what another service sends: known names, string values', () => {
    expect(storedHeadersFromJson({ expires: 'soon', 'x-amz-checksum-sha256': 'abc', 'x-amz-checksum-type': 'FULL_OBJECT' })).to.deep.equal({
      expires: 'soon',
      'x-amz-checksum-sha256': 'abc',
      'x-amz-checksum-type': 'FULL_OBJECT',
    });
    expect(storedHeadersFromJson(undefined)).to.equal(undefined);
    expect(storedHeadersFromJson({})).to.equal(undefined);
    for (const bad of [{ 'x-amz-checksum-md5': 'x' }, { location: '/x' }, { expires: 1 }, ['cache-control'], 'cache-control']) {
      expect(
        codeOf(() => storedHeadersFromJson(bad)),
        JSON.stringify(bad),
      ).to.equal('InvalidArgument');
    }
  });

  it("keeps a website redirect that is a /path or an http(s) URL of at most 2 KiB; a copy never takes its source's", () => {
    const redirect = 'x-amz-website-redirect-location';
    for (const good of ['/a.html', 'http://example.com', 'https://example.com/x?y=1', `/${'a'.repeat(2047)}`]) {
      expect(standardHeadersOf([[redirect.toUpperCase(), good]]), good.slice(0, 30)).to.deep.equal({ [redirect]: good });
    }
    for (const bad of ['a.html', 'ftp://example.com', 'HTTP://example.com', '', `/${'a'.repeat(2048)}`]) {
      const code = codeOf(() => storedHeadersFromJson({ [redirect]: bad }));
      expect(code, bad.slice(0, 30)).to.equal('InvalidRedirectLocation');
    }
    const source = { 'cache-control': 'no-cache', [redirect]: '/source.html' };
    expect(copiedHeaders(source, undefined)).to.deep.equal({ 'cache-control': 'no-cache' });
    expect(copiedHeaders(source, { [redirect]: '/mine.html', expires: 'ignored' })).to.deep.equal({ 'cache-control': 'no-cache', [redirect]: '/mine.html' });
    expect(copiedHeaders({ [redirect]: '/source.html' }, undefined)).to.equal(undefined);
  });
});
