import { expect } from 'chai';
import { ModelServerReconciler } from '../../controllers/model-server/model-server-reconciler.js';
import type { Manager } from '../../operator/manager.js';
import type { WatchEvent } from '../support/fake-kube/index.js';
import { eventually, mustGet, startHarness, TEST_SETTINGS, type Harness } from '../controllers/support/harness.js';
import { ManualClock, passTime } from './manual-clock.js';

/** Both managers judge lease expiry and renew deadlines on `clock`, which tests advance. */
const election = (identity: string, clock: ManualClock) => ({
  namespace: 'strata-system',
  leaseName: 'strata-operator',
  identity,
  leaseDurationMs: 1000,
  renewDeadlineMs: 600,
  retryPeriodMs: 100,
  monotonicNow: clock.now,
});

const modelServer = (name: string) => ({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name, namespace: 'ml' }, spec: {} });

describe('operator leader election', () => {
  let h: Harness;
  let one: Manager;
  let two: Manager;
  let clock: ManualClock;

  beforeEach(async () => {
    h = await startHarness();
    clock = new ManualClock();
    const reconcilers = () => [new ModelServerReconciler(h.kube, h.events, TEST_SETTINGS)];
    one = h.start(reconcilers(), { leaderElection: election('one', clock) });
    two = h.start(reconcilers(), { leaderElection: election('two', clock) });
  });
  afterEach(() => h.stop());

  const lease = () =>
    mustGet(h.fake, 'coordination.k8s.io/v1', 'Lease', 'strata-system', 'strata-operator') as unknown as {
      spec: { holderIdentity: string; leaseTransitions: number };
    };

  it('lets exactly one of two managers lead, and the other take over after the lease expires', async () => {
    const leader = await eventually(() => {
      expect(one.isLeader !== two.isLeader, 'exactly one leader').to.equal(true);
      return one.isLeader ? one : two;
    }, 'one leader');
    const standby = leader === one ? two : one;
    expect(lease().spec.holderIdentity).to.equal(leader === one ? 'one' : 'two');
    await h.kube.apply(modelServer('first') as never);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'ml', 'first-model-server'), 'leader reconciles');

    // The leader dies without releasing the lease; the standby waits for expiry, then leads.
    await leader.abandon();
    expect(leader.isLeader).to.equal(false);
    expect(standby.isLeader).to.equal(false);
    await passTime(clock, () => expect(standby.isLeader).to.equal(true), 'standby takes over');
    await standby.settled();
    expect(lease().spec.holderIdentity).to.equal(standby === one ? 'one' : 'two');
    expect(lease().spec.leaseTransitions).to.equal(1);
    await h.kube.apply(modelServer('second') as never);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'ml', 'second-model-server'), 'new leader reconciles');
  });

  const oneLeader = () =>
    eventually(() => {
      expect(one.isLeader !== two.isLeader, 'exactly one leader').to.equal(true);
      return one.isLeader ? one : two;
    }, 'one leader');

  it('steps down when the lease cannot be renewed within the renew deadline, and leads again once it can', async () => {
    const leader = await oneLeader();
    await eventually(() => expect(leader.runningControllers).to.equal(1), 'controllers running');
    // The API server answers nothing about Leases (say etcd is down): nobody may keep reconciling.
    h.fake.failRequests = (_method, path) => (path.includes('/leases') ? 503 : undefined);
    await passTime(
      clock,
      () => {
        expect(one.isLeader).to.equal(false);
        expect(two.isLeader).to.equal(false);
      },
      'leader steps down after the renew deadline',
    );
    await leader.settled();
    expect(leader.runningControllers).to.equal(0);
    await h.kube.apply(modelServer('during-outage') as never);
    h.fake.failRequests = undefined;
    await oneLeader();
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'ml', 'during-outage-model-server'), 'reconciled by the next leader');
  });

  it('steps down when another holder has taken the lease', async () => {
    const leader = await oneLeader();
    const standby = leader === one ? two : one;
    const coordination = h.fake.state.typeForKind('coordination.k8s.io/v1', 'Lease');
    const current = h.fake.state.get(coordination, 'strata-system', 'strata-operator') as unknown as { spec: object };
    // Someone else (an operator of another version, a split brain) holds a fresh lease for a minute.
    const renewTime = new Date().toISOString().replace(/Z$/, '000Z');
    h.fake.state.update(coordination, 'strata-system', 'strata-operator', {
      ...current,
      spec: { ...current.spec, holderIdentity: 'intruder', renewTime, leaseDurationSeconds: 60 },
    } as never);
    await eventually(() => expect(leader.isLeader).to.equal(false), 'leader steps down');
    await leader.settled();
    expect(leader.runningControllers).to.equal(0);
    expect(standby.isLeader).to.equal(false);
    expect(lease().spec.holderIdentity).to.equal('intruder');
  });

  it('hands the lease back on a graceful stop', async () => {
    const leader = await eventually(() => {
      expect(one.isLeader || two.isLeader).to.equal(true);
      return one.isLeader ? one : two;
    }, 'one leader');
    const standby = leader === one ? two : one;
    await eventually(() => expect(leader.runningControllers).to.equal(1), 'controllers running');
    // When the lease is handed back, the old leader must have stopped reconciling already.
    const runningAtRelease: number[] = [];
    h.fake.state.on('event', (e: WatchEvent) => {
      const spec = (e.object as { spec?: { holderIdentity?: string } }).spec;
      if (e.object.kind === 'Lease' && spec?.holderIdentity === '') runningAtRelease.push(leader.runningControllers);
    });
    await leader.stop();
    expect(runningAtRelease).to.deep.equal([0]);
    await eventually(() => expect(standby.isLeader).to.equal(true), 'standby takes over');
    expect(lease().spec.holderIdentity).to.equal(standby === one ? 'one' : 'two');
  });
});
