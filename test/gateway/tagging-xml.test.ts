import { expect } from 'chai';
import { objectTagsFromJson, parseTaggingHeader } from '../../images/object-model/src/index.js';
import { parseTagging, renderTagging, type TaggingXml } from '../../images/gateway/src/s3/tagging-xml.js';
import { parseXml, renderXml } from '../../images/gateway/src/s3/xml.js';
import { s3CodeOf } from '../support/s3-code.js';

const parse = (inner: string, of: 'bucket' | 'object' = 'bucket') => parseTagging(parseXml<TaggingXml>(`<Tagging>${inner}</Tagging>`, 'Tagging'), of);

describe('tagging document (S3 XML ⇄ tags)', () => {
  it('reads tags in order (an empty TagSet is no tags) and writes them back unchanged', () => {
    const tags = parse(
      '<TagSet><Tag><Key>team</Key><Value>data eng</Value></Tag><Tag><Key>cost-centre</Key><Value>4711</Value></Tag><Tag><Key>empty</Key><Value></Value></Tag></TagSet>',
    );
    expect(tags).to.deep.equal([
      { key: 'team', value: 'data eng' },
      { key: 'cost-centre', value: '4711' },
      { key: 'empty', value: '' },
    ]);
    expect(parseTagging(parseXml<TaggingXml>(renderXml('Tagging', renderTagging(tags)), 'Tagging'), 'object')).to.deep.equal(tags);
    expect(parseTagging(parseXml<TaggingXml>(renderXml('Tagging', renderTagging([])), 'Tagging'), 'object')).to.deep.equal([]);
    expect(parse('<TagSet/>')).to.deep.equal([]);
  });

  it("refuses what S3 refuses, with S3's error codes", () => {
    const tag = (k: string, v = 'v') => `<Tag><Key>${k}</Key><Value>${v}</Value></Tag>`;
    const cases: Array<[string, string]> = [
      ['', 'MalformedXML'],
      ['<TagSet><Tag><Value>v</Value></Tag></TagSet>', 'MalformedXML'],
      [`<TagSet>${tag('a')}${tag('a')}</TagSet>`, 'InvalidTag'],
      [`<TagSet>${tag('aws:cloudformation')}</TagSet>`, 'InvalidTag'],
      [`<TagSet>${tag('k'.repeat(129))}</TagSet>`, 'InvalidTag'],
      [`<TagSet>${tag('k', 'v'.repeat(257))}</TagSet>`, 'InvalidTag'],
      [`<TagSet>${tag('semi;colon')}</TagSet>`, 'InvalidTag'],
      [`<TagSet>${Array.from({ length: 51 }, (_, i) => tag(`k${i}`)).join('')}</TagSet>`, 'InvalidTag'],
    ];
    for (const [xml, code] of cases)
      expect(
        s3CodeOf(() => parse(xml)),
        xml.slice(0, 100),
      ).to.equal(code);
  });

  it('allows 50 tags on a bucket and 10 on an object', () => {
    const tags = (n: number) => `<TagSet>${Array.from({ length: n }, (_, i) => `<Tag><Key>k${i}</Key><Value>v</Value></Tag>`).join('')}</TagSet>`;
    expect(parse(tags(50), 'bucket')).to.have.length(50);
    expect(parse(tags(10), 'object')).to.have.length(10);
    expect(s3CodeOf(() => parse(tags(11), 'object'))).to.equal('InvalidTag');
  });
});

describe('x-amz-tagging header (URL-encoded key=value pairs)', () => {
  it('reads pairs in order, decoding %XX and + as S3 does; a key without = has an empty value', () => {
    expect(parseTaggingHeader('team=data%20eng&cost-centre=4711&empty=&bare')).to.deep.equal([
      { key: 'team', value: 'data eng' },
      { key: 'cost-centre', value: '4711' },
      { key: 'empty', value: '' },
      { key: 'bare', value: '' },
    ]);
    expect(parseTaggingHeader('a+b=%C3%A9t%C3%A9%2B1')).to.deep.equal([{ key: 'a b', value: 'été+1' }]);
    expect(parseTaggingHeader('')).to.deep.equal([]);
  });

  it('refuses what S3 refuses with InvalidTag: bad escapes, repeated keys, aws: keys, bad characters, more than 10 tags', () => {
    const cases = ['a=%E0%A4%A', 'a=1&a=2', 'aws%3Asystem=1', 'semi%3Bcolon=1', '=value', Array.from({ length: 11 }, (_, i) => `k${i}=v`).join('&')];
    for (const raw of cases)
      expect(
        s3CodeOf(() => parseTaggingHeader(raw)),
        raw,
      ).to.equal('InvalidTag');
  });

  it('checks tags that reach an internal API as JSON the same way', () => {
    expect(objectTagsFromJson(undefined)).to.equal(undefined);
    expect(objectTagsFromJson([{ key: 'a', value: '1', extra: true }])).to.deep.equal([{ key: 'a', value: '1' }]);
    for (const bad of [{}, 'a=1', [{ key: 'a' }], [{ key: 'a', value: 1 }], [{ key: 'aws:x', value: '1' }]]) {
      expect(
        s3CodeOf(() => objectTagsFromJson(bad)),
        JSON.stringify(bad),
      ).to.equal('InvalidTag');
    }
  });
});
