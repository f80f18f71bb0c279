import { expect } from 'chai';
import { parseTagging, renderTagging, type TaggingXml } from '../../images/gateway/src/s3/tagging-xml.js';
import { parseXml, renderXml } from '../../images/gateway/src/s3/xml.js';
import { s3CodeOf } from '../support/s3-code.js';

const parse = (inner: string) => parseTagging(parseXml<TaggingXml>(`<Tagging>${inner}</Tagging>`, 'Tagging'));

describe('bucket tagging document (S3 XML ⇄ tags)', () => {
  it('reads tags in order (an empty TagSet is no tags) and writes them back unchanged', () => {
    const tags = parse('<TagSet><Tag><Key>team</Key><Value>data eng</Value></Tag><Tag><Key>cost-centre</Key><Value>4711</Value></Tag><Tag><Key>empty</Key><Value></Value></Tag></TagSet>');
    expect(tags).to.deep.equal([{ key: 'team', value: 'data eng' }, { key: 'cost-centre', value: '4711' }, { key: 'empty', value: '' }]);
    expect(parseTagging(parseXml<TaggingXml>(renderXml('Tagging', renderTagging(tags)), 'Tagging'))).to.deep.equal(tags);
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
    for (const [xml, code] of cases) expect(s3CodeOf(() => parse(xml)), xml.slice(0, 100)).to.equal(code);
  });
});
