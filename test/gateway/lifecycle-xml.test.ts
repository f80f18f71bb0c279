import { expect } from 'chai';
import { parseLifecycleConfiguration, renderLifecycleConfiguration, type LifecycleConfigurationXml } from '../../images/gateway/src/s3/lifecycle-xml.js';
import { s3CodeOf } from '../support/s3-code.js';
import { parseXml, renderXml } from '../../images/gateway/src/s3/xml.js';
import { createdNoLaterThan, expiryAfterDays, lifecycleFilterMatches, objectExpiration, type LifecycleRule } from '../../images/object-model/src/index.js';

const parse = (rules: string): LifecycleRule[] =>
  parseLifecycleConfiguration(
    parseXml<LifecycleConfigurationXml>(
      `<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${rules}</LifecycleConfiguration>`,
      'LifecycleConfiguration',
    ),
  );

const refusal = (rules: string): string => s3CodeOf(() => parse(rules));

describe('lifecycle configuration (S3 XML ⇄ rules)', () => {
  it('reads every filter form and action S3 defines, and writes them back as they were given', () => {
    const xml = `
      <Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>7</Days></Expiration></Rule>
      <Rule><ID>legacy</ID><Prefix>tmp/</Prefix><Status>Disabled</Status><Expiration><Date>2031-01-01T00:00:00.000Z</Date></Expiration>
        <AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>
      <Rule><ID>big</ID><Filter><And><Prefix>v/</Prefix><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan><ObjectSizeLessThan>5000</ObjectSizeLessThan></And></Filter>
        <Status>Enabled</Status><Expiration><Days>30</Days></Expiration><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule>
      <Rule><ID>tagged</ID><Filter><Tag><Key>class</Key><Value>scratch</Value></Tag></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>
      <Rule><ID>all</ID><Filter></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>10</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`;
    const rules = parse(xml);
    expect(rules).to.deep.equal([
      { id: 'logs', enabled: true, filter: { form: 'filter', prefix: 'logs/', tags: [] }, expiration: { days: 7 } },
      {
        id: 'legacy',
        enabled: false,
        filter: { form: 'prefix', prefix: 'tmp/', tags: [] },
        expiration: { date: '2031-01-01T00:00:00.000Z' },
        abortIncompleteMultipartUploadDays: 2,
      },
      {
        id: 'big',
        enabled: true,
        filter: { form: 'and', prefix: 'v/', tags: [], sizeGreaterThan: 100, sizeLessThan: 5000 },
        expiration: { days: 30 },
        noncurrentVersionExpiration: { noncurrentDays: 3 },
      },
      { id: 'tagged', enabled: true, filter: { form: 'filter', prefix: '', tags: [{ key: 'class', value: 'scratch' }] }, expiration: { days: 1 } },
      { id: 'all', enabled: true, filter: { form: 'filter', prefix: '', tags: [] }, abortIncompleteMultipartUploadDays: 10 },
    ]);
    // Written out and read again: the same rules (the GET answer is what PUT stored).
    const written = renderXml('LifecycleConfiguration', renderLifecycleConfiguration(rules));
    expect(parseLifecycleConfiguration(parseXml<LifecycleConfigurationXml>(written, 'LifecycleConfiguration'))).to.deep.equal(rules);
    expect(written).to.include('<Rule><ID>legacy</ID><Prefix>tmp/</Prefix><Status>Disabled</Status>');
    expect(written).to.include('<Filter><Tag><Key>class</Key><Value>scratch</Value></Tag></Filter>');
  });

  it('gives a rule without an ID a generated one, and a date without a time midnight UTC', () => {
    const [rule] = parse('<Rule><Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Date>2031-05-01</Date></Expiration></Rule>');
    expect(rule!.id).to.match(/^[0-9a-f-]{36}$/);
    expect(rule!.expiration).to.deep.equal({ date: '2031-05-01T00:00:00.000Z' });
  });

  it("refuses what S3 refuses, with S3's error codes", () => {
    const rule = (inner: string) => `<Rule><ID>r</ID>${inner}</Rule>`;
    const cases: Array<[string, string]> = [
      ['', 'MalformedXML'], // no rule
      [rule('<Filter><Prefix>a</Prefix></Filter><Expiration><Days>1</Days></Expiration>'), 'MalformedXML'], // no Status
      [rule('<Filter><Prefix>a</Prefix></Filter><Status>On</Status><Expiration><Days>1</Days></Expiration>'), 'MalformedXML'],
      [rule('<Status>Enabled</Status><Expiration><Days>1</Days></Expiration>'), 'MalformedXML'], // no filter
      [rule('<Prefix>a</Prefix><Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>'), 'MalformedXML'],
      [
        rule('<Filter><Prefix>a</Prefix><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>'),
        'MalformedXML',
      ],
      [
        rule('<Filter><Prefix>a</Prefix></Filter><Filter><Prefix>b</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>'),
        'MalformedXML',
      ],
      [rule('<Filter><Prefix>a</Prefix><Prefix>b</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>'), 'MalformedXML'],
      [rule('<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status>'), 'InvalidRequest'], // no action
      [rule('<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Days>0</Days></Expiration>'), 'InvalidArgument'],
      [rule('<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Days>-3</Days></Expiration>'), 'MalformedXML'],
      [rule('<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days><Date>2031-01-01</Date></Expiration>'), 'MalformedXML'],
      [rule('<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Date>2031-01-01T10:00:00Z</Date></Expiration>'), 'InvalidArgument'],
      [rule('<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Date>soon</Date></Expiration>'), 'InvalidArgument'],
      [
        rule(
          '<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation></AbortIncompleteMultipartUpload>',
        ),
        'InvalidArgument',
      ],
      [
        rule(
          '<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>',
        ),
        'InvalidArgument',
      ],
      [
        rule('<Filter><And><Tag><Key>k</Key></Tag><Tag><Key>k</Key></Tag></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>'),
        'InvalidArgument',
      ],
      [
        rule(
          '<Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan><ObjectSizeLessThan>10</ObjectSizeLessThan></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>',
        ),
        'InvalidArgument',
      ],
      [
        rule('<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition>'),
        'NotImplemented',
      ],
      // A malformed transition is S3's 400 before the 501 (s3-tests' test_lifecycle_transition_set_invalid_date).
      [
        rule(
          '<Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status><Expiration><Date>2023-09-27</Date></Expiration><Transition><Date>20220927</Date><StorageClass>GLACIER</StorageClass></Transition>',
        ),
        'InvalidArgument',
      ],
      [rule('<Filter/><Status>Enabled</Status><Transition><Days>x</Days><StorageClass>GLACIER</StorageClass></Transition>'), 'MalformedXML'],
      [`<Rule><ID>${'x'.repeat(256)}</ID><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, 'InvalidArgument'],
      [
        rule('<Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>') +
          rule('<Filter/><Status>Enabled</Status><Expiration><Days>2</Days></Expiration>'),
        'InvalidArgument',
      ],
      [rule(`<Filter><Prefix>${'p'.repeat(1025)}</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>`), 'InvalidArgument'],
      [
        Array.from({ length: 1001 }, (_, i) => `<Rule><ID>r${i}</ID><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`).join(''),
        'InvalidRequest',
      ],
    ];
    for (const [xml, code] of cases) expect(refusal(xml), xml.slice(0, 160)).to.equal(code);
  });

  it("expires at the first midnight UTC at least the rule's days after creation, as S3 counts", () => {
    // S3's own example: created 2014-01-15 10:30 UTC, 3 days → 2014-01-19 00:00 UTC.
    expect(expiryAfterDays(new Date('2014-01-15T10:30:00Z'), 3).toISOString()).to.equal('2014-01-19T00:00:00.000Z');
    expect(expiryAfterDays(new Date('2014-01-15T00:00:00Z'), 3).toISOString()).to.equal('2014-01-18T00:00:00.000Z');
    // createdNoLaterThan is its inverse: an object created at the cutoff has expired by now, one a millisecond later has not.
    const now = new Date('2014-01-19T05:00:00Z');
    const cutoff = createdNoLaterThan(now, 3);
    expect(expiryAfterDays(cutoff, 3) <= now).to.equal(true);
    expect(expiryAfterDays(new Date(cutoff.getTime() + 1), 3) <= now).to.equal(false);
  });

  it('matches objects by prefix, size and tags (every tag the filter names); the earliest enabled rule is reported', () => {
    const rules = parse(`
      <Rule><ID>slow</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>30</Days></Expiration></Rule>
      <Rule><ID>fast</ID><Filter><And><Prefix>logs/</Prefix><ObjectSizeGreaterThan>1000</ObjectSizeGreaterThan></And></Filter><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule>
      <Rule><ID>off</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Disabled</Status><Expiration><Days>1</Days></Expiration></Rule>
      <Rule><ID>tag</ID><Filter><Tag><Key>a</Key><Value>b</Value></Tag></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`);
    const created = new Date('2030-03-01T12:00:00Z');
    expect(objectExpiration(rules, { key: 'logs/big', size: 5000, lastModified: created })).to.deep.equal({
      expiry: new Date('2030-03-04T00:00:00Z'),
      ruleId: 'fast',
    });
    expect(objectExpiration(rules, { key: 'logs/small', size: 10, lastModified: created })).to.deep.equal({
      expiry: new Date('2030-04-01T00:00:00Z'),
      ruleId: 'slow',
    });
    expect(objectExpiration(rules, { key: 'other', size: 10, lastModified: created })).to.equal(undefined);
    expect(lifecycleFilterMatches(rules[3]!.filter, { key: 'x', size: 1 })).to.equal(false);
    expect(lifecycleFilterMatches(rules[3]!.filter, { key: 'x', size: 1, tags: [{ key: 'a', value: 'c' }] })).to.equal(false);
    expect(
      lifecycleFilterMatches(rules[3]!.filter, {
        key: 'x',
        size: 1,
        tags: [
          { key: 'z', value: '1' },
          { key: 'a', value: 'b' },
        ],
      }),
    ).to.equal(true);
    expect(objectExpiration(rules, { key: 'other', size: 10, lastModified: created, tags: [{ key: 'a', value: 'b' }] })).to.deep.equal({
      expiry: new Date('2030-03-03T00:00:00Z'),
      ruleId: 'tag',
    });
  });
});
