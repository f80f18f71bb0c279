import { expect } from 'chai';
import { template } from './support/helm.js';

const serviceMonitors = (objs: Array<{ kind: string }>) => objs.filter((o) => o.kind === 'ServiceMonitor').length;

/** What a first `helm install` on a bare cluster, or as a subchart, meets. */
describe('chart on a bare cluster', function () {
  this.timeout(60_000);

  it('renders ServiceMonitors only where the Prometheus Operator\'s API exists', async () => {
    expect(serviceMonitors(await template(['metrics.serviceMonitor.enabled=true']))).to.equal(0);
    expect(serviceMonitors(await template(['metrics.serviceMonitor.enabled=true'], ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor']))).to.equal(2);
  });

  it('accepts a parent chart\'s global values', async () => {
    const objs = await template(['global.imageRegistry=registry.example.com']);
    expect(objs.some((o) => o.kind === 'Deployment')).to.equal(true);
  });

  it('asks for no external PostgreSQL or RabbitMQ by default: each stack brings its own', async () => {
    const secret = (await template()).find((o) => o.kind === 'Secret' && o.metadata.name === 'strata-operator-platform') as unknown as { stringData: Record<string, string> };
    expect(secret.stringData).to.include({ STRATA_PG_URL: '', STRATA_AMQP_URL: '' });
  });
});
