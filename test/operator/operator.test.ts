import { expect } from 'chai';
import { ModelServerReconciler } from '../../controllers/model-server/model-server-reconciler.js';
import { loadOperatorEnv } from '../../operator/config.js';
import { startOperator, type RunningOperator } from '../../operator/operator.js';
import { eventually, mustGet, startHarness, TEST_SETTINGS, type Harness } from '../controllers/support/harness.js';

const modelServer = (name: string) => ({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name, namespace: 'ml' }, spec: { replicas: 1 } });

describe('operator process', () => {
  let h: Harness;
  let operator: RunningOperator | undefined;

  beforeEach(async () => {
    h = await startHarness();
    operator = undefined;
  });
  afterEach(async () => {
    await operator?.stop();
    await h.stop();
  });

  it('serves health, readiness, leadership and reconcile metrics, and stops gracefully', async () => {
    const cfg = loadOperatorEnv({
      PORT: '0',
      LOG_LEVEL: 'silent',
      LEASE_DURATION_SECONDS: '2',
      RETRY_PERIOD_SECONDS: '1',
      POD_NAME: 'operator-0',
      STRATA_IMAGE_TAG: 'v9',
    });
    operator = await startOperator(h.fake.kubeConfig(), cfg);
    const url = operator.http.url;
    expect((await fetch(`${url}/healthz`)).status).to.equal(200);
    await eventually(async () => expect((await (await fetch(`${url}/leader`)).json()) as object).to.deep.equal({ leader: true }), 'leading');
    await eventually(async () => expect((await fetch(`${url}/readyz`)).status).to.equal(200), 'ready');
    await h.kube.apply(modelServer('m') as never);
    const deployment = await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'ml', 'm-model-server'), 'reconciled');
    expect(JSON.stringify(deployment)).to.contain('ghcr.io/strata-dev/model-server:v9');
    const metrics = await eventually(async () => {
      const text = await (await fetch(`${url}/metrics`)).text();
      expect(text).to.match(/strata_operator_reconcile_total\{[^}]*controller="modelserver"[^}]*result="requeue"[^}]*\} \d+/);
      return text;
    }, 'reconcile counted');
    expect(metrics).to.contain('strata_operator_reconcile_duration_seconds_bucket');
    expect(metrics).to.contain('strata_operator_workqueue_depth');
    expect(metrics).to.match(/strata_operator_leader\{[^}]*\} 1/);
    expect(h.fake.requests.some((r) => r.includes('/apis/coordination.k8s.io/v1/namespaces/strata-system/leases'))).to.equal(true);

    await operator.stop();
    operator = undefined;
    expect(
      await fetch(`${url}/healthz`).then(
        () => 'answered',
        () => 'closed',
      ),
    ).to.equal('closed');
  });

  it('still reconciles when watches go silent, through the periodic resync', async () => {
    h.start([new ModelServerReconciler(h.kube, h.events, TEST_SETTINGS)], { resyncPeriodMs: 200 });
    await h.kube.apply(modelServer('before') as never);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'ml', 'before-model-server'), 'reconciled via watch');
    h.fake.silenceWatches = true;
    await h.kube.apply(modelServer('during') as never);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'ml', 'during-model-server'), 'reconciled via resync');
  });

  it('retries a failing reconcile with backoff until it succeeds', async () => {
    let failures = 2;
    const inner = new ModelServerReconciler(h.kube, h.events, TEST_SETTINGS);
    const flaky = Object.assign(Object.create(inner) as ModelServerReconciler, {
      reconcile: async (req: { namespace: string; name: string }) => {
        if (failures-- > 0) throw new Error('transient');
        return inner.reconcile(req);
      },
    });
    h.start([flaky]);
    await h.kube.apply(modelServer('flaky') as never);
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'ml', 'flaky-model-server'), 'reconciled after retries');
    expect(failures).to.be.lessThan(0);
  });
});
