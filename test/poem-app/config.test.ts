import path from 'node:path';
import { expect } from 'chai';
import { ConfigError } from '../../images/service-kit/src/index.js';
import { DEFAULT_API_BASE_URL, loadPoemAppConfig } from '../../images/poem-app/src/config.js';
import { parseDatabaseUrl } from '../../images/poem-app/src/database-url.js';
import { normalizeBaseUrl } from '../../images/poem-app/src/poet.js';

describe('poem-app configuration', () => {
  describe('DATABASE_URL', () => {
    it('accepts file: URLs, sqlite: URLs, plain paths and :memory:', () => {
      expect(parseDatabaseUrl('file:./data/poems.db')).to.equal('./data/poems.db');
      expect(parseDatabaseUrl('file:/var/lib/strata/poems.db')).to.equal('/var/lib/strata/poems.db');
      expect(parseDatabaseUrl('file:///var/lib/strata/poems.db')).to.equal('/var/lib/strata/poems.db');
      expect(parseDatabaseUrl('file:./my%20poems.db?mode=rwc')).to.equal('./my poems.db');
      expect(parseDatabaseUrl('sqlite:poems.db')).to.equal('poems.db');
      expect(parseDatabaseUrl('./data/poems.db')).to.equal('./data/poems.db');
      expect(parseDatabaseUrl('/tmp/poems.db')).to.equal('/tmp/poems.db');
      expect(parseDatabaseUrl(':memory:')).to.equal(':memory:');
    });

    it('refuses other schemes and empty values with a clear message', () => {
      expect(() => parseDatabaseUrl('postgres://localhost/poems')).to.throw(/unsupported DATABASE_URL scheme "postgres:"/);
      expect(() => parseDatabaseUrl('file:')).to.throw(/has no path/);
      expect(() => parseDatabaseUrl('  ')).to.throw(/empty/);
    });
  });

  it('applies defaults: port 3000, local model server and its verse model, no retries, 30 s timeout', () => {
    const c = loadPoemAppConfig({});
    expect(c.port).to.equal(3000);
    expect(c.databasePath).to.equal('./data/poems.db');
    // The container's default too: strata-verse writes words, strata-tiny answers token ids by design.
    expect(c.upstream).to.include({ baseUrl: DEFAULT_API_BASE_URL, model: 'strata-verse', maxRetries: 0, timeoutMs: 30_000 });
    expect(c.production).to.equal(false);
    // Slow clients: a body silent 20 s is refused, an answer unread for 30 s is cut.
    expect(c).to.include({ bodyIdleTimeoutMs: 20_000, readerIdleTimeoutMs: 30_000 });
  });

  it('reads every variable, and tolerates OPENAI_API_KEY as a fallback key', () => {
    const c = loadPoemAppConfig({
      PORT: '3100',
      NODE_ENV: 'production',
      DATABASE_URL: `file:${path.join('/srv', 'poems.db')}`,
      API_BASE_URL: 'https://llm.example.com/v1',
      OPENAI_API_KEY: 'dummy',
      API_MODEL: 'poet-large',
      API_TIMEOUT_MS: '1500',
      POEM_APP_BODY_IDLE_TIMEOUT_MS: '500',
      POEM_APP_READER_IDLE_TIMEOUT_MS: '0',
    });
    expect(c).to.deep.include({ port: 3100, production: true, databasePath: '/srv/poems.db', bodyIdleTimeoutMs: 500, readerIdleTimeoutMs: 0 });
    expect(c.upstream).to.include({ baseUrl: 'https://llm.example.com/v1', apiKey: 'dummy', model: 'poet-large', timeoutMs: 1500 });
    expect(loadPoemAppConfig({ API_KEY: 'real', OPENAI_API_KEY: 'dummy' }).upstream.apiKey).to.equal('real');
  });

  it('names every bad variable in one ConfigError', () => {
    try {
      loadPoemAppConfig({ PORT: 'abc', DATABASE_URL: 'mysql://x/y', API_BASE_URL: 'not a url', API_TIMEOUT_MS: '-5' });
      expect.fail('should throw');
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      const text = (err as ConfigError).message;
      for (const name of ['PORT', 'DATABASE_URL', 'API_BASE_URL', 'API_TIMEOUT_MS']) expect(text).to.include(name);
      expect(text).to.include('unsupported DATABASE_URL scheme "mysql:"');
    }
  });

  it('treats a bare upstream origin as its /v1 API and keeps explicit paths', () => {
    expect(normalizeBaseUrl('http://127.0.0.1:8000')).to.equal('http://127.0.0.1:8000/v1');
    expect(normalizeBaseUrl('http://127.0.0.1:8000/')).to.equal('http://127.0.0.1:8000/v1');
    expect(normalizeBaseUrl('http://127.0.0.1:8000/v1/')).to.equal('http://127.0.0.1:8000/v1');
    expect(normalizeBaseUrl('https://gw.example.com/openai/v1')).to.equal('https://gw.example.com/openai/v1');
  });
});
