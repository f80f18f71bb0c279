import { createLogger, stopOnSignals } from '../images/service-kit/src/index.js';
import { loadOperatorEnv } from './config.js';
import { loadKubeConfig } from './kube-config.js';
import { startOperator } from './operator.js';
import { runRenderCommand } from './render-command.js';

/**
 * Container entrypoint: env config, kube config (in-cluster or KUBECONFIG), then run until SIGTERM.
 * `render -f FILE --namespace NS` instead prints what it would apply for the file's resources.
 */
if (process.argv[2] === 'render') {
  process.exitCode = runRenderCommand(
    process.argv.slice(3),
    process.env,
    (s) => process.stdout.write(s),
    (s) => process.stderr.write(s),
  );
} else {
  const cfg = loadOperatorEnv();
  const operator = await startOperator(loadKubeConfig(), cfg);
  stopOnSignals([operator], createLogger('operator', cfg.LOG_LEVEL));
}
