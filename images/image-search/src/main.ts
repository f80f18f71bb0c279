// Entrypoint of the image search container: config from env, listen on PORT, stop on SIGTERM.
import { ConfigError, createLogger, stopOnSignals } from '../../service-kit/src/index.js';
import { startImageSearch } from './app.js';

const logger = createLogger('image-search');
try {
  const service = await startImageSearch({ logger });
  stopOnSignals([service], logger);
} catch (err) {
  if (err instanceof ConfigError) {
    logger.fatal(err.message);
    process.exit(2);
  }
  logger.fatal({ err }, 'image search failed to start');
  process.exit(1);
}
