import { expect } from 'chai';
import { modelServerConfigFromEnv } from '../../images/model-server/src/config.js';
import { ConfigError } from '../../images/service-kit/src/index.js';

describe('model-server configuration from the environment', () => {
  it('has the documented defaults (no model folder or names: the built-in models; no API keys)', () => {
    expect(modelServerConfigFromEnv({})).to.deep.equal({
      port: 8000,
      host: '0.0.0.0',
      batching: true,
      maxBatch: 32,
      batchWindowMs: 3,
      admissionWave: 8,
      maxQueue: 256,
      maxBodyBytes: 1024 * 1024,
      // Slow clients: a body silent 20 s is refused, an answer unread for 30 s is cut.
      bodyIdleTimeoutMs: 20_000,
      readerIdleTimeoutMs: 30_000,
      threads: 1,
      // On by default: the built-in models' 64-token context is shorter than the poem app's prompts.
      truncatePrompt: true,
      executionProvider: 'cpu',
    });
  });

  it('reads every variable; MODEL_SERVER_PORT wins over PORT', () => {
    const c = modelServerConfigFromEnv({
      PORT: '9000',
      MODEL_SERVER_PORT: '8100',
      MODEL_SERVER_HOST: '127.0.0.1',
      MODEL_DIR: '/models/tiny',
      MODEL_NAMES: ' a, b ,,c',
      MODEL_SERVER_BATCHING: 'false',
      MODEL_SERVER_MAX_BATCH: '8',
      MODEL_SERVER_BATCH_WINDOW_MS: '0',
      MODEL_SERVER_ADMISSION_WAVE: '1',
      MODEL_SERVER_MAX_QUEUE: '10',
      MODEL_SERVER_MAX_BODY_BYTES: '2048',
      MODEL_SERVER_THREADS: '0',
      MODEL_SERVER_BODY_IDLE_TIMEOUT_MS: '500',
      MODEL_SERVER_READER_IDLE_TIMEOUT_MS: '0',
      MODEL_SERVER_TRUNCATE_PROMPT: 'true',
      STRATA_EXECUTION_PROVIDER: 'cuda',
      MODEL_SERVER_API_KEYS: 'k1, k2,',
      STRATA_ALLOWED_HOSTS: 'Studio.lan, models.lan',
    });
    expect(c).to.deep.equal({
      port: 8100,
      host: '127.0.0.1',
      modelDir: '/models/tiny',
      modelNames: ['a', 'b', 'c'],
      apiKeys: ['k1', 'k2'],
      allowedHosts: ['studio.lan', 'models.lan'],
      batching: false,
      maxBatch: 8,
      batchWindowMs: 0,
      admissionWave: 1,
      maxQueue: 10,
      maxBodyBytes: 2048,
      bodyIdleTimeoutMs: 500,
      readerIdleTimeoutMs: 0,
      threads: 0,
      truncatePrompt: true,
      executionProvider: 'cuda',
    });
    expect(modelServerConfigFromEnv({ PORT: '9000' }).port).to.equal(9000);
  });

  it('refuses bad values, naming every bad variable', () => {
    try {
      modelServerConfigFromEnv({ MODEL_SERVER_MAX_BATCH: '0', MODEL_SERVER_BATCHING: 'maybe', STRATA_EXECUTION_PROVIDER: 'tpu' });
      expect.fail('should throw');
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      const message = (err as Error).message;
      for (const name of ['MODEL_SERVER_MAX_BATCH', 'MODEL_SERVER_BATCHING', 'STRATA_EXECUTION_PROVIDER']) expect(message).to.include(name);
    }
  });
});
