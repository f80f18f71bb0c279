// Container entrypoint: configuration from env, then serve until SIGTERM/SIGINT.
import { ConfigError, createLogger, stopOnSignals } from '../../service-kit/src/index.js';
import { SERVICE_NAME, startPoemApp } from './app.js';
import { loadPoemAppConfig } from './config.js';

const logger = createLogger(SERVICE_NAME);
try {
  const config = loadPoemAppConfig();
  const service = await startPoemApp({ ...config, logger });
  stopOnSignals([service], logger);
} catch (err) {
  if (err instanceof ConfigError) logger.fatal(err.message);
  else logger.fatal({ err }, 'poem app failed to start');
  process.exit(1);
}
