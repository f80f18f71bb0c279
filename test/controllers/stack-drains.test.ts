import { expect } from 'chai';
import { renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { selects } from '../support/network-policy.js';
import { TEST_SETTINGS, type Doc } from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';

/** A node drain evicts at most one pod of each of the stack's servers, and no node holds two of them if it can help it. */
describe('storage stack survives node drains', () => {
  const objects = renderStorageStack('ns', [], TEST_SETTINGS, { postgresPassword: 'p', rabbitmqPassword: 'r' }) as Doc[];
  const budgets = objects.filter((o) => o.kind === 'PodDisruptionBudget');
  const servers = objects.filter((o) => o.kind === 'StatefulSet');

  for (const [component, count] of [
    ['redis', 6],
    ['postgresql', 2],
    ['rabbitmq', 1],
  ] as const) {
    it(`${component}: one disruption budget (one pod at a time) over all ${count} pods, spread over nodes`, () => {
      const pods = servers.filter((s) => s.spec.template.metadata.labels['app.kubernetes.io/name'] === component);
      expect(pods).to.have.length(count);
      const covering = budgets.filter((b) => pods.some((p) => selects(b.spec.selector, p.spec.template.metadata.labels)));
      expect(covering).to.have.length(1);
      expect(covering[0].spec.maxUnavailable).to.equal(1);
      for (const p of pods) {
        expect(selects(covering[0].spec.selector, p.spec.template.metadata.labels)).to.equal(true);
        const [term] = p.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution;
        expect(term.podAffinityTerm.topologyKey).to.equal('kubernetes.io/hostname');
        // The term repels the pod's siblings (and so itself from them).
        for (const sibling of pods) expect(selects(term.podAffinityTerm.labelSelector, sibling.spec.template.metadata.labels)).to.equal(true);
      }
    });
  }

  describe('gateway replicas (STRATA_GATEWAY_REPLICAS)', () => {
    const render = (gatewayReplicas: number) =>
      renderStorageStack('ns', [], { ...TEST_SETTINGS, gatewayReplicas }, { postgresPassword: 'p', rabbitmqPassword: 'r' }) as Doc[];
    const deployment = (objs: Doc[], name: string) => objs.find((o) => o.kind === 'Deployment' && o.metadata.name === name)!;
    const budgetsOver = (objs: Doc[], d: Doc) =>
      objs.filter((o) => o.kind === 'PodDisruptionBudget' && selects(o.spec.selector, d.spec.template.metadata.labels));

    it('runs N gateways spread over nodes (ScheduleAnyway) under a budget of one at a time; the planes stay single', async () => {
      const objs = render(3);
      const gateway = deployment(objs, 'strata-gateway');
      expect(gateway.spec.replicas).to.equal(3);
      expect(gateway.spec.strategy).to.deep.equal({ type: 'RollingUpdate' });
      const [spread] = gateway.spec.template.spec.topologySpreadConstraints;
      expect(spread).to.include({ maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' });
      // The constraint counts exactly the gateway's pods.
      expect(selects(spread.labelSelector, gateway.spec.template.metadata.labels)).to.equal(true);
      for (const other of objs.filter((o) => o.kind === 'Deployment' && o !== gateway))
        expect(selects(spread.labelSelector, other.spec.template.metadata.labels)).to.equal(false);
      const budgets = budgetsOver(objs, gateway);
      expect(budgets).to.have.length(1);
      expect(budgets[0].spec.maxUnavailable).to.equal(1);
      for (const o of [gateway, ...budgets]) await validateManifest(o);
      // The planes stay single unless asked (plane-replicas.test.ts).
      for (const name of ['strata-data-plane', 'strata-control-plane']) {
        const d = deployment(objs, name);
        expect(d.spec.replicas, name).to.equal(1);
        expect(d.spec.template.spec.topologySpreadConstraints, name).to.equal(undefined);
        expect(budgetsOver(objs, d), name).to.have.length(0);
      }
    });

    it('one gateway (the default) has no spread and no budget', () => {
      expect(TEST_SETTINGS.gatewayReplicas).to.equal(1);
      const objs = render(1);
      const gateway = deployment(objs, 'strata-gateway');
      expect(gateway.spec.replicas).to.equal(1);
      expect(gateway.spec.template.spec.topologySpreadConstraints).to.equal(undefined);
      expect(budgetsOver(objs, gateway)).to.have.length(0);
    });
  });
});
