import { createConfiguration, ServerConfiguration, type Configuration, type KubeConfig } from '@kubernetes/client-node';
import { requestSignal } from '../controllers/support/reconcile-signal.js';

/**
 * A client-node configuration for `kc` whose every request ends after `timeoutMs`, or earlier with
 * the reconcile it was made for (client-go's request timeout and context cancellation).
 */
export function timedConfiguration(kc: KubeConfig, timeoutMs: number): Configuration {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kube config: no current cluster');
  return createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    promiseMiddleware: [
      {
        pre: (request) => {
          request.setSignal(requestSignal(timeoutMs));
          return Promise.resolve(request);
        },
        post: (response) => Promise.resolve(response),
      },
    ],
  });
}
