import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { loadGatewayEnv } from '../../images/gateway/src/config.js';
import { pathStyleHost, sentTarget, virtualHostedStyle } from '../../images/gateway/src/s3/virtual-host.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';
import { ConfigError } from '../../images/service-kit/src/index.js';

function request(host: string | undefined, url: string): IncomingMessage {
  return { headers: host === undefined ? {} : { host }, url } as IncomingMessage;
}

describe('gateway: virtual-hosted-style requests become path style', () => {
  const rewrite = virtualHostedStyle(['s3.example.com', 'Localhost.']);

  it('a bucket in the host moves into the path; the target as sent is kept for SigV4, the domain for path-style URLs', () => {
    const cases: Array<[string, string, string, string]> = [
      ['photos.s3.example.com', '/cat.jpg?x-id=GetObject', '/photos/cat.jpg?x-id=GetObject', 's3.example.com'],
      ['photos.s3.example.com:9000', '/', '/photos/', 's3.example.com:9000'],
      ['my.dotted.bucket.s3.example.com', '/a/b', '/my.dotted.bucket/a/b', 's3.example.com'],
      ['PHOTOS.S3.Example.COM', '/k', '/photos/k', 's3.example.com'],
      ['b1.localhost:9000', '?list-type=2', '/b1/?list-type=2', 'localhost:9000'],
    ];
    for (const [host, url, rewritten, base] of cases) {
      const req = request(host, url);
      rewrite(req);
      expect(req.url, host).to.equal(rewritten);
      expect(sentTarget(req), host).to.equal(url);
      expect(pathStyleHost(req), host).to.equal(base);
    }
  });

  it('every other host is left alone: the domain itself, other domains, addresses, no Host', () => {
    for (const host of [
      's3.example.com',
      's3.example.com:9000',
      'localhost:9000',
      'evil-s3.example.com',
      'photos.example.com',
      'photos.s3.example.com.attacker.net',
      '127.0.0.1:9000',
      '[::1]:9000',
      'x.[::1]',
      undefined,
    ]) {
      const req = request(host, '/bucket/key');
      rewrite(req);
      expect(req.url, String(host)).to.equal('/bucket/key');
      expect(pathStyleHost(req), String(host)).to.equal(host);
    }
    const none = virtualHostedStyle([]);
    const req = request('photos.s3.example.com', '/k');
    none(req);
    expect(req.url).to.equal('/k');
  });

  it('STRATA_S3_DOMAINS: a list of domain names (none by default in the image, localhost standalone); anything else is a config error', () => {
    const secrets = { STRATA_INTERNAL_TOKEN: 'x'.repeat(16), STRATA_JWT_SECRET: 'y'.repeat(32) };
    expect(loadGatewayEnv(secrets).STRATA_S3_DOMAINS).to.deep.equal([]);
    expect(loadGatewayEnv({ ...secrets, STRATA_S3_DOMAINS: ' S3.Example.com , s3.internal ' }).STRATA_S3_DOMAINS).to.deep.equal([
      's3.example.com',
      's3.internal',
    ]);
    expect(loadStandaloneEnv({}).STRATA_S3_DOMAINS).to.deep.equal(['localhost']);
    expect(loadStandaloneEnv({ STRATA_S3_DOMAINS: '' }).STRATA_S3_DOMAINS).to.deep.equal([]);
    for (const bad of ['http://s3.example.com', 's3.example.com:9000', 'under_score.com', '*.example.com']) {
      expect(() => loadGatewayEnv({ ...secrets, STRATA_S3_DOMAINS: bad }), bad).to.throw(ConfigError, /STRATA_S3_DOMAINS/);
    }
  });
});
