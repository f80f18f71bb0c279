import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createLogger, createRegistry } from '../../images/service-kit/src/index.js';
import { HttpBucketService } from '../../controllers/bucket/bucket-service.js';
import type { KubeClient } from '../../controllers/support/kube-client.js';
import { runWithReconcileSignal } from '../../controllers/support/reconcile-signal.js';
import type { ReconcileRequest, Reconciler } from '../../controllers/support/reconciler.js';
import { loadOperatorEnv } from '../../operator/config.js';
import { ClientNodeKubeClient } from '../../operator/kube-client.js';
import { startOperator } from '../../operator/operator.js';
import { Manager } from '../../operator/manager.js';
import { createOperatorMetrics } from '../../operator/metrics.js';
import { eventually, harnessHooks, stored } from '../controllers/support/harness.js';

/** Writes one ConfigMap per ModelServer through its own client, and logs when it starts and how it ends. */
class ConfigMapWriter implements Reconciler {
  readonly name = 'writer';
  readonly primary = { apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', plural: 'modelservers' };
  readonly owns = [];
  constructor(
    private readonly id: string,
    private readonly kube: KubeClient,
    private readonly log: string[],
  ) {}

  async reconcile({ namespace, name }: ReconcileRequest, signal: AbortSignal) {
    this.log.push(`${this.id} starts`);
    try {
      await this.kube.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-by-${this.id}`, namespace }, data: {} } as never);
      this.log.push(`${this.id} applied`);
    } finally {
      if (signal.aborted) this.log.push(`${this.id} aborted (${(signal.reason as Error).name})`);
    }
    return {};
  }
}

const modelServer = (name: string) => ({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name, namespace: 'ml' }, spec: {} });

describe('leadership that stops: abort signals, request timeouts, reconcile deadlines', () => {
  const h = harnessHooks('each');
  const managers: Manager[] = [];
  afterEach(async () => {
    h.fake.hangRequests = undefined;
    for (const m of managers.splice(0)) await m.abandon();
  });

  const manager = (id: string, log: string[], extra: { reconcileTimeoutMs?: number; leaderElection?: boolean } = {}) => {
    // Each manager talks as its own user, so that the fake API server can hang one replica's requests only.
    const kc = h.fake.kubeConfig(id);
    const m = new Manager(kc, {
      logger: createLogger('leadership-test', 'silent'),
      metrics: createOperatorMetrics(createRegistry('leadership-test', false)),
      reconcilers: [new ConfigMapWriter(id, new ClientNodeKubeClient(kc), log)],
      workers: 1,
      resyncPeriodMs: 60_000,
      baseBackoffMs: 20,
      maxBackoffMs: 200,
      reconcileTimeoutMs: extra.reconcileTimeoutMs ?? 60_000,
      ...(extra.leaderElection === false
        ? {}
        : {
            leaderElection: {
              namespace: 'strata-system',
              leaseName: 'strata-operator',
              identity: id,
              leaseDurationMs: 3000,
              renewDeadlineMs: 1000,
              retryPeriodMs: 100,
            },
            onLeadershipLost: () => log.push(`${id} lost the lease`),
          }),
    });
    managers.push(m);
    m.start();
    return m;
  };

  it('aborts a reconcile hung on the API server when the lease is lost, reports the loss, and only then lets the standby act', async () => {
    const log: string[] = [];
    const one = manager('one', log);
    const two = manager('two', log);
    const leader = await eventually(() => {
      expect(one.isLeader !== two.isLeader, 'exactly one leader').to.equal(true);
      return one.isLeader ? 'one' : 'two';
    }, 'one leader');
    const standby = leader === 'one' ? 'two' : 'one';
    await eventually(() => expect((leader === 'one' ? one : two).runningControllers).to.equal(1), 'controllers running');

    // The leader's write hangs (an API server that accepted the connection and never answers) ...
    let leaseHangs = false;
    h.fake.hangRequests = (_method, path, user) => user === leader && (path.includes('/configmaps') || (leaseHangs && path.includes('/leases')));
    await h.kube.apply(modelServer('m') as never);
    await eventually(() => expect(log).to.include(`${leader} starts`), 'leader reconciling');
    // ... and then so do its lease renewals: it loses the lease at its renew deadline.
    leaseHangs = true;

    await eventually(() => expect(stored(h.fake, 'v1', 'ConfigMap', 'ml', `m-by-${standby}`)).to.not.equal(undefined), 'standby reconciles', 15_000);
    const at = (entry: string) => {
      expect(log, entry).to.include(entry);
      return log.indexOf(entry);
    };
    // The old leader's reconcile ended (aborted, never applied) and the loss was reported before the standby began.
    expect(log).to.not.include(`${leader} applied`);
    expect(at(`${leader} aborted (Error)`)).to.be.lessThan(at(`${leader} lost the lease`));
    expect(at(`${leader} lost the lease`)).to.be.lessThan(at(`${standby} starts`));
    expect((leader === 'one' ? one : two).runningControllers).to.equal(0);
    expect(stored(h.fake, 'v1', 'ConfigMap', 'ml', `m-by-${leader}`)).to.equal(undefined);
  });

  it('the operator process reports a lost lease (where main exits with status 1)', async () => {
    const cfg = loadOperatorEnv({
      PORT: '0',
      LOG_LEVEL: 'silent',
      LEASE_DURATION_SECONDS: '3',
      RENEW_DEADLINE_SECONDS: '1',
      RETRY_PERIOD_SECONDS: '1',
      POD_NAME: 'operator-0',
    });
    let lost = 0;
    const operator = await startOperator(h.fake.kubeConfig('operator'), cfg, {}, () => lost++);
    try {
      await eventually(() => expect(operator.manager.isLeader).to.equal(true), 'leading');
      h.fake.hangRequests = (_method, path, user) => user === 'operator' && path.includes('/leases');
      await eventually(() => expect(lost).to.equal(1), 'lease loss reported', 15_000);
      expect(operator.manager.runningControllers).to.equal(0);
    } finally {
      h.fake.hangRequests = undefined;
      await operator.stop();
    }
  });

  it('aborts a reconcile past its deadline and retries it', async () => {
    const log: string[] = [];
    let hang = true;
    h.fake.hangRequests = (_method, path) => hang && path.includes('/configmaps');
    manager('solo', log, { reconcileTimeoutMs: 300, leaderElection: false });
    await h.kube.apply(modelServer('slow') as never);
    await eventually(() => expect(log).to.include('solo aborted (TimeoutError)'), 'deadline aborts the reconcile');
    hang = false;
    await eventually(() => expect(stored(h.fake, 'v1', 'ConfigMap', 'ml', 'slow-by-solo')).to.not.equal(undefined), 'retried after the deadline');
    expect(log.filter((e) => e === 'solo starts').length).to.be.greaterThan(1);
  });

  it('ends an API request that does not answer within the request timeout', async () => {
    h.fake.hangRequests = (_method, path) => path.includes('/configmaps');
    const client = new ClientNodeKubeClient(h.fake.kubeConfig(), 200);
    const outcome = await client.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ml', name: 'x' }).then(
      () => 'answered',
      (err: Error) => err.name,
    );
    expect(outcome).to.match(/Abort|Timeout/);
  });

  describe('HTTP calls to a stack', () => {
    let server: Server;
    beforeEach(async () => {
      server = createServer(() => undefined); // accepts every request, answers none
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    });
    afterEach(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    it("end with the reconcile's abort signal", async () => {
      const service = new HttpBucketService({
        namespace: 'ml',
        controlPlaneUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        rootUser: 'root',
        internalToken: 't',
      });
      const reconcile = new AbortController();
      const call = runWithReconcileSignal(reconcile.signal, () => service.stats('b')).then(
        () => 'answered',
        (err: Error) => err.name,
      );
      await new Promise((r) => setTimeout(r, 50));
      reconcile.abort(new Error('lease lost'));
      expect(await call).to.equal('Error');
    });
  });
});
