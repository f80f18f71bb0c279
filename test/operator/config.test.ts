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
