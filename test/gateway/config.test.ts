import { expect } from 'chai';
import { loadGatewayEnv } from '../../images/gateway/src/config.js';
import { ConfigError } from '../../images/service-kit/src/index.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';

describe('gateway configuration', () => {
  const secrets = { STRATA_INTERNAL_TOKEN: 'x'.repeat(16), STRATA_JWT_SECRET: 'y'.repeat(32) };

  it('STRATA_CORS_ORIGINS: any origin by default, a list of origins, or none; anything else is a config error', () => {
    expect(loadGatewayEnv(secrets).STRATA_CORS_ORIGINS).to.deep.equal(['*']);
    expect(loadStandaloneEnv({}).STRATA_CORS_ORIGINS).to.deep.equal(['*']);
    expect(loadGatewayEnv({ ...secrets, STRATA_CORS_ORIGINS: 'https://app.example.com, http://localhost:3000' }).STRATA_CORS_ORIGINS).to.deep.equal([
      'https://app.example.com',
      'http://localhost:3000',
    ]);
    expect(loadGatewayEnv({ ...secrets, STRATA_CORS_ORIGINS: 'none' }).STRATA_CORS_ORIGINS).to.deep.equal([]);
    for (const bad of ['app.example.com', 'https://app.example.com/path', 'ftp://x']) {
      expect(() => loadGatewayEnv({ ...secrets, STRATA_CORS_ORIGINS: bad }), bad).to.throw(ConfigError, /STRATA_CORS_ORIGINS/);
    }
  });

  it('STRATA_DEFAULT_OBJECT_OWNERSHIP: BucketOwnerEnforced (S3) by default, one of the three ownerships, anything else a config error that names them', () => {
    expect(loadGatewayEnv(secrets).STRATA_DEFAULT_OBJECT_OWNERSHIP).to.equal('BucketOwnerEnforced');
    expect(loadStandaloneEnv({}).STRATA_DEFAULT_OBJECT_OWNERSHIP).to.equal('BucketOwnerEnforced');
    for (const ok of ['BucketOwnerEnforced', 'BucketOwnerPreferred', 'ObjectWriter'] as const) {
      expect(loadGatewayEnv({ ...secrets, STRATA_DEFAULT_OBJECT_OWNERSHIP: ok }).STRATA_DEFAULT_OBJECT_OWNERSHIP).to.equal(ok);
      expect(loadStandaloneEnv({ STRATA_DEFAULT_OBJECT_OWNERSHIP: ok }).STRATA_DEFAULT_OBJECT_OWNERSHIP).to.equal(ok);
    }
    for (const bad of ['objectwriter', 'public', '']) {
      expect(() => loadGatewayEnv({ ...secrets, STRATA_DEFAULT_OBJECT_OWNERSHIP: bad }), bad).to.throw(
        ConfigError,
        /STRATA_DEFAULT_OBJECT_OWNERSHIP: one of BucketOwnerEnforced, BucketOwnerPreferred, ObjectWriter/,
      );
      expect(() => loadStandaloneEnv({ STRATA_DEFAULT_OBJECT_OWNERSHIP: bad }), bad).to.throw(ConfigError, /STRATA_DEFAULT_OBJECT_OWNERSHIP/);
    }
  });
});
