import { createLogger } from '../../service-kit/src/logger.js';
import { stopOnSignals } from '../../service-kit/src/service.js';
import { startModelServer } from './app.js';
import { modelServerConfigFromEnv } from './config.js';

const logger = createLogger('model-server');
const service = await startModelServer({ ...modelServerConfigFromEnv(), logger });
stopOnSignals([service], logger);
