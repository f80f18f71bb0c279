import { expect } from 'chai';
import { leaderIdentity, loadOperatorEnv, settingsFrom } from '../../operator/config.js';
import { ConfigError } from '../../images/service-kit/src/index.js';

describe('operator configuration', () => {
  it('passes the platform connection settings on, read replicas as a list', () => {
    const settings = settingsFrom(
      loadOperatorEnv({
        STRATA_PG_URL: 'postgres://p/strata',
        STRATA_PG_REPLICA_URLS: 'postgres://r1/strata, postgres://r2/strata',
        STRATA_AMQP_URL: 'amqp://mq',
      }),
    );
    expect(settings).to.deep.include({
      postgresUrl: 'postgres://p/strata',
      postgresReplicaUrls: ['postgres://r1/strata', 'postgres://r2/strata'],
      amqpUrl: 'amqp://mq',
    });
    expect(settingsFrom(loadOperatorEnv({})).postgresReplicaUrls).to.deep.equal([]);
  });

  it("takes the storage stack's settings as a JSON object of scalars, and refuses what the operator sets itself", () => {
    expect(settingsFrom(loadOperatorEnv({})).stackSettings).to.deep.equal({});
    const given = settingsFrom(
      loadOperatorEnv({
        STRATA_STACK_SETTINGS: JSON.stringify({ STRATA_S3_DOMAINS: 's3.example.com', STRATA_BUCKET_NAME_HOLD_MS: 120000, STRATA_IN_PROCESS_HTTP: false }),
      }),
    );
    expect(given.stackSettings).to.deep.equal({ STRATA_S3_DOMAINS: 's3.example.com', STRATA_BUCKET_NAME_HOLD_MS: '120000', STRATA_IN_PROCESS_HTTP: 'false' });
    const refusals: Array<[string, RegExp]> = [
      ['{"STRATA_DATA_DIR": "/elsewhere"}', /STRATA_DATA_DIR: set by the operator itself/],
      ['{"STRATA_PG_URL": "postgres://x"}', /STRATA_PG_URL: set by the operator itself/],
      ['{"STRATA_ROOT_PASSWORD": "guessable"}', /STRATA_ROOT_PASSWORD: set by the operator itself/],
      ['{"PORT": 1}', /PORT: set by the operator itself/],
      ['{"STRATA_BACKEND_MINIO_SECRET_KEY": "s"}', /put them in the strata-backends Secret/],
      ['{"not-a-name": "x"}', /not-a-name: not an environment variable name/],
      ['{"STRATA_S3_DOMAINS": ["a", "b"]}', /STRATA_S3_DOMAINS: a string, number or boolean/],
      ['["STRATA_S3_DOMAINS"]', /a JSON object/],
      ['STRATA_S3_DOMAINS=x', /not JSON/],
    ];
    for (const [json, message] of refusals) {
      expect(() => loadOperatorEnv({ STRATA_STACK_SETTINGS: json }), json).to.throw(ConfigError, message);
    }
  });

  it('runs one gateway per stack unless STRATA_GATEWAY_REPLICAS asks for more, and refuses fewer than one', () => {
    expect(settingsFrom(loadOperatorEnv({})).gatewayReplicas).to.equal(1);
    expect(settingsFrom(loadOperatorEnv({ STRATA_GATEWAY_REPLICAS: '3' })).gatewayReplicas).to.equal(3);
    for (const bad of ['0', '-1', 'two']) expect(() => loadOperatorEnv({ STRATA_GATEWAY_REPLICAS: bad }), bad).to.throw(ConfigError, 'STRATA_GATEWAY_REPLICAS');
  });

  it('runs one data plane and one control plane per stack unless STRATA_DATA_PLANE_REPLICAS / STRATA_CONTROL_PLANE_REPLICAS ask for more', () => {
    const defaults = settingsFrom(loadOperatorEnv({}));
    expect([defaults.dataPlaneReplicas, defaults.controlPlaneReplicas]).to.deep.equal([1, 1]);
    const asked = settingsFrom(loadOperatorEnv({ STRATA_DATA_PLANE_REPLICAS: '3', STRATA_CONTROL_PLANE_REPLICAS: '2' }));
    expect([asked.dataPlaneReplicas, asked.controlPlaneReplicas]).to.deep.equal([3, 2]);
    for (const name of ['STRATA_DATA_PLANE_REPLICAS', 'STRATA_CONTROL_PLANE_REPLICAS'])
      for (const bad of ['0', '-1', 'two', '51']) expect(() => loadOperatorEnv({ [name]: bad }), `${name}=${bad}`).to.throw(ConfigError, name);
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
      for (const [key, value] of [
        ['KUBERNETES_SERVICE_HOST', saved.host],
        ['KUBERNETES_SERVICE_PORT', saved.port],
        ['KUBECONFIG', saved.kubeconfig],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});
