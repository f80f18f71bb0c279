import { expect } from 'chai';
import { renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { selects } from '../support/network-policy.js';
import { TEST_SETTINGS, type Doc } from './support/harness.js';

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
});
