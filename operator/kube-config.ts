import { KubeConfig } from '@kubernetes/client-node';

/** In a pod: the service account's in-cluster config; elsewhere KUBECONFIG or ~/.kube/config. */
export function loadKubeConfig(env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kc = new KubeConfig();
  if (env.KUBERNETES_SERVICE_HOST && !env.KUBECONFIG) kc.loadFromCluster();
  else kc.loadFromDefault();
  return kc;
}
