import { expect } from 'chai';
import { parseCorsConfiguration, renderCorsConfiguration, type CorsConfigurationXml } from '../../images/gateway/src/s3/cors-xml.js';
import { s3CodeOf } from '../support/s3-code.js';
import { parseXml, renderXml } from '../../images/gateway/src/s3/xml.js';
import { corsPatternMatches, findCorsRule } from '../../images/object-model/src/index.js';

const parse = (rules: string) => parseCorsConfiguration(parseXml<CorsConfigurationXml>(`<CORSConfiguration>${rules}</CORSConfiguration>`, 'CORSConfiguration'));
const refusal = (rules: string): string => s3CodeOf(() => parse(rules));

describe('bucket CORS configuration (S3 XML ⇄ rules, matching)', () => {
  it('reads rules with every element S3 defines and writes them back unchanged', () => {
    const rules = parse(`
      <CORSRule><ID>app</ID><AllowedOrigin>https://app.example</AllowedOrigin><AllowedOrigin>https://*.example.org</AllowedOrigin>
        <AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader><AllowedHeader>Content-Type</AllowedHeader>
        <ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>600</MaxAgeSeconds></CORSRule>
      <CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>`);
    expect(rules).to.deep.equal([
      {
        id: 'app',
        allowedOrigins: ['https://app.example', 'https://*.example.org'],
        allowedMethods: ['GET', 'PUT'],
        allowedHeaders: ['x-amz-*', 'Content-Type'],
        exposeHeaders: ['ETag'],
        maxAgeSeconds: 600,
      },
      { allowedOrigins: ['*'], allowedMethods: ['GET'], allowedHeaders: [], exposeHeaders: [] },
    ]);
    const written = renderXml('CORSConfiguration', renderCorsConfiguration(rules));
    expect(parseCorsConfiguration(parseXml<CorsConfigurationXml>(written, 'CORSConfiguration'))).to.deep.equal(rules);
  });

  it("refuses what S3 refuses, with S3's error codes", () => {
    const cases: Array<[string, string]> = [
      ['', 'MalformedXML'],
      ['<CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>', 'MalformedXML'],
      ['<CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule>', 'MalformedXML'],
      ['<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule>', 'InvalidRequest'],
      ['<CORSRule><AllowedOrigin>https://*.*.example</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>', 'InvalidRequest'],
      ['<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>a*b*</AllowedHeader></CORSRule>', 'InvalidRequest'],
      ['<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>soon</MaxAgeSeconds></CORSRule>', 'MalformedXML'],
      ['<CORSRule><AllowedOrigin><x/></AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>', 'MalformedXML'],
      [Array.from({ length: 101 }, () => '<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>').join(''), 'InvalidRequest'],
    ];
    for (const [xml, code] of cases) expect(refusal(xml), xml.slice(0, 120)).to.equal(code);
  });

  it('matches origins and headers with one wildcard (headers without regard to case), the first allowing rule winning', () => {
    expect(corsPatternMatches('https://*.example.org', 'https://a.b.example.org')).to.equal(true);
    expect(corsPatternMatches('https://*.example.org', 'https://example.org')).to.equal(false);
    expect(corsPatternMatches('https://app.example', 'https://app.example.evil')).to.equal(false);
    expect(corsPatternMatches('X-Amz-*', 'x-amz-meta-a', true)).to.equal(true);
    expect(corsPatternMatches('*', '')).to.equal(true);
    const rules = parse(`
      <CORSRule><ID>writes</ID><AllowedOrigin>https://app.example</AllowedOrigin><AllowedMethod>PUT</AllowedMethod><AllowedHeader>content-type</AllowedHeader></CORSRule>
      <CORSRule><ID>reads</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>`);
    expect(findCorsRule(rules, { origin: 'https://app.example', method: 'PUT', headers: ['content-type'] })?.id).to.equal('writes');
    expect(findCorsRule(rules, { origin: 'https://app.example', method: 'PUT', headers: ['content-type', 'x-amz-meta-a'] })).to.equal(undefined);
    expect(findCorsRule(rules, { origin: 'https://other.example', method: 'GET' })?.id).to.equal('reads');
    expect(findCorsRule(rules, { origin: 'https://other.example', method: 'PUT' })).to.equal(undefined);
  });
});
