import { expect } from 'chai';
import { leaderIdentity, loadOperatorEnv, settingsFrom } from '../../operator/config.js';

describe('operator configuration', () => {
  it('passes the platform connection settings on, read replicas as a list', () => {
    const settings = settingsFrom(
      loadOperatorEnv({ STRATA_PG_URL: 'postgres://p/strata', STRATA_PG_REPLICA_URLS: 'postgres://r1/strata, postgres://r2/strata', STRATA_AMQP_URL: 'amqp://mq' }),
    );
    expect(settings).to.deep.include({ postgresUrl: 'postgres://p/strata', postgresReplicaUrls: ['postgres://r1/strata', 'postgres://r2/strata'], amqpUrl: 'amqp://mq' });
    expect(settingsFrom(loadOperatorEnv({})).postgresReplicaUrls).to.deep.equal([]);
  });

  it('gives every process its own leader identity, even two restarts of one pod', () => {
    const cfg = loadOperatorEnv({ POD_NAME: 'strata-operator-0' });
    const [a, b] = [leaderIdentity(cfg), leaderIdentity(cfg)];
    expect(a).to.match(/^strata-operator-0_/);
    expect(a).to.not.equal(b);
  });
});

describe('operator kube config', () => {
  it('uses the in-cluster service account config in a pod, KUBECONFIG elsewhere', async () => {
    const { loadKubeConfig } = await import('../../operator/kube-config.js');
    // client-node's loadFromCluster reads the service host and port from process.env itself.
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT, kubeconfig: process.env.KUBECONFIG };
    Object.assign(process.env, { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' });
    delete process.env.KUBECONFIG;
    try {
      const inCluster = loadKubeConfig();
      expect(inCluster.getCurrentCluster()?.server).to.equal('https://10.96.0.1:443');
      expect(inCluster.getCurrentCluster()?.caFile).to.equal('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt');
      const file = loadKubeConfig({ ...process.env, KUBECONFIG: '/nonexistent/kubeconfig' });
      expect(file.getCurrentCluster()?.server).to.not.equal('https://10.96.0.1:443');
    } finally {
      for (const [key, value] of [['KUBERNETES_SERVICE_HOST', saved.host], ['KUBERNETES_SERVICE_PORT', saved.port], ['KUBECONFIG', saved.kubeconfig]] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});
