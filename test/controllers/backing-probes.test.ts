import { expect } from 'chai';
import { renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { TEST_CREDENTIALS, TEST_SETTINGS, type Doc } from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';

describe("the stack's own PostgreSQL and RabbitMQ", () => {
  const statefulSets = renderStorageStack('ns', [], TEST_SETTINGS, TEST_CREDENTIALS).filter((o) => o.kind === 'StatefulSet') as Doc[];
  const container = (name: string) => statefulSets.find((s) => s.metadata.name === name)!.spec.template.spec.containers[0];

  it('are restarted when they stop answering: every server container has a liveness probe', async () => {
    for (const name of ['strata-postgresql', 'strata-postgresql-replica', 'strata-rabbitmq']) {
      expect(container(name), name).to.have.property('livenessProbe').that.is.an('object');
      await validateManifest(statefulSets.find((s) => s.metadata.name === name)!);
    }
    expect(statefulSets.every((s) => s.spec.template.spec.containers.every((c: { livenessProbe?: object }) => c.livenessProbe))).to.equal(true);
  });

  it("PostgreSQL's liveness probe fails only when nothing answers, not while the server starts or replays WAL", () => {
    const command = container('strata-postgresql').livenessProbe.exec.command as string[];
    expect(command.slice(0, 2)).to.deep.equal(['sh', '-c']);
    expect(command[2]).to.match(/^pg_isready .*; \[ \$\? -ne 2 \]$/);
  });
});
