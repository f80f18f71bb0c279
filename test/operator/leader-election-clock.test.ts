import { expect } from 'chai';
import { createLogger } from '../../images/service-kit/src/index.js';
import { LeaderElector } from '../../operator/leader-election.js';
import { FakeKubeServer } from '../support/fake-kube/index.js';
import { eventually } from '../controllers/support/harness.js';
import { ManualClock } from './manual-clock.js';

const micro = (ms: number) => new Date(ms).toISOString().replace('Z', '000Z');
const LEASE_PATH = '/apis/coordination.k8s.io/v1/namespaces/strata-system/leases/strata-operator';

/** Leader election judges expiry on its own clock and never outlives its renew deadline. */
describe('leader election: observed time and renew deadline', () => {
  let fake: FakeKubeServer;
  let elector: LeaderElector | undefined;
  const stops: string[] = [];
  beforeEach(async () => {
    fake = await new FakeKubeServer().start();
    stops.length = 0;
  });
  afterEach(async () => {
    fake.hangRequests = undefined;
    await elector?.stop(false);
    elector = undefined;
    await fake.stop();
  });

  const start = (clock?: ManualClock) => {
    elector = new LeaderElector(
      fake.kubeConfig(),
      {
        namespace: 'strata-system',
        leaseName: 'strata-operator',
        identity: 'me',
        leaseDurationMs: 1000,
        renewDeadlineMs: 500,
        retryPeriodMs: 50,
        onStartedLeading: () => undefined,
        onStoppedLeading: () => stops.push('stopped'),
        ...(clock ? { monotonicNow: clock.now } : {}),
      },
      createLogger('leader-test', 'silent'),
    );
    elector.start();
    return elector;
  };
  const t = () => fake.state.typeForKind('coordination.k8s.io/v1', 'Lease');
  const holdLease = (renewTime: string, leaseDurationSeconds = 1) => {
    const existing = fake.state.tryGet(t(), 'strata-system', 'strata-operator');
    const spec = { holderIdentity: 'other', leaseDurationSeconds, renewTime, acquireTime: renewTime };
    if (existing) fake.state.update(t(), 'strata-system', 'strata-operator', { ...existing, spec });
    else fake.state.create(t(), 'strata-system', { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'strata-operator' }, spec } as never);
  };

  const reads = () => fake.requests.filter((r) => r === `GET ${LEASE_PATH}`).length;
  /** Two more reads of the lease: the first has been judged (ticks run one after the other). */
  const judged = async () => {
    const before = reads();
    await eventually(() => expect(reads()).to.be.at.least(before + 2), 'the lease read and judged');
  };

  it("never takes a lease that keeps being renewed, however far behind the holder's clock is", async () => {
    const clock = new ManualClock();
    const hourAgo = Date.now() - 3_600_000;
    holdLease(micro(hourAgo), 60);
    const me = start(clock);
    // The holder renews its 60 s lease just under a lease duration apart on our clock, five times over.
    for (let i = 1; i <= 5; i++) {
      await judged();
      clock.advance(59_000);
      await judged();
      expect(me.isLeader, `renewal ${i}`).to.equal(false);
      holdLease(micro(hourAgo + i), 60);
    }
    // The holder goes silent: the lease is ours after one lease duration on our clock, not before.
    await judged();
    clock.advance(59_999);
    await judged();
    expect(me.isLeader, 'just before the lease expires').to.equal(false);
    clock.advance(2);
    await eventually(() => expect(me.isLeader).to.equal(true), 'took over');
  });

  it("takes over a silent lease after its duration even when the holder's clock ran ahead", async () => {
    const clock = new ManualClock();
    holdLease(micro(Date.now() + 3_600_000), 60);
    const me = start(clock);
    await judged();
    clock.advance(59_999);
    await judged();
    expect(me.isLeader, 'just before the lease expires').to.equal(false);
    clock.advance(2);
    await eventually(() => expect(me.isLeader).to.equal(true), 'took over');
  });

  it('takes no live lease when the wall clock jumps forward (lease timing runs on the monotonic clock)', async () => {
    holdLease(micro(Date.now()), 60);
    const me = start();
    await eventually(() => expect(reads()).to.be.greaterThan(0), 'lease read');
    // NTP (or an operator) steps the clock an hour ahead; the holder's 60 s lease is still live.
    const realNow = Date.now.bind(Date);
    Date.now = () => realNow() + 3_600_000;
    try {
      const before = reads();
      await eventually(() => expect(reads()).to.be.greaterThan(before + 5), 'several more reads');
      expect(me.isLeader).to.equal(false);
    } finally {
      Date.now = realNow;
    }
  });

  it('stops leading by the renew deadline when renewals hang, before the lease can expire for others', async () => {
    const me = start();
    await eventually(() => expect(me.isLeader).to.equal(true), 'leading');
    fake.hangRequests = (_method, path) => path === LEASE_PATH;
    // The renewal never answers: the leader gives up on it and steps down while it still hangs.
    await eventually(() => expect(me.isLeader).to.equal(false), 'stepped down', 5000);
    expect(stops).to.deep.equal(['stopped']);
  });
});
