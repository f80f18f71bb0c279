import { createLogger, stopOnSignals } from '../images/service-kit/src/index.js';
import { loadOperatorEnv } from './config.js';
import { loadKubeConfig } from './kube-config.js';
import { startOperator } from './operator.js';

/** Container entrypoint: env config, kube config (in-cluster or KUBECONFIG), then run until SIGTERM. */
const cfg = loadOperatorEnv();
const operator = await startOperator(loadKubeConfig(), cfg);
stopOnSignals([operator], createLogger('operator', cfg.LOG_LEVEL));
