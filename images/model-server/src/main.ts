import { createLogger, stopOnSignals } from '../../service-kit/src/index.js';
import { startModelServer } from './app.js';
import { modelServerConfigFromEnv } from './config.js';

const logger = createLogger('model-server');
const service = await startModelServer({ ...modelServerConfigFromEnv(), logger });
stopOnSignals([service], logger);
