import { expect } from 'chai';
import { FakeKubeServer } from './index.js';

/** Server-side apply of lists the Kubernetes schema marks as maps: entries merge by key, per field manager. */
describe('fake Kubernetes API server: server-side apply of keyed lists', () => {
  let fake: FakeKubeServer;
  beforeEach(async () => {
    fake = await new FakeKubeServer().start();
  });
  afterEach(() => fake.stop());

  const apply = async (path: string, manager: string, body: object) => {
    const res = await fetch(`${fake.url}${path}?fieldManager=${manager}&force=true`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/apply-patch+yaml', authorization: 'Bearer t' },
      body: JSON.stringify(body),
    });
    expect(res.status, await res.clone().text()).to.equal(200);
    return (await res.json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  };
  const deploymentPath = '/apis/apps/v1/namespaces/a/deployments/web';
  const deployment = (containers: object[]) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: 'a' },
    spec: { selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers } } },
  });

  it('merges containers by name, env by name and container ports by containerPort across two managers', async () => {
    await apply(deploymentPath, 'operator', deployment([{ name: 'app', image: 'app:1', env: [{ name: 'A', value: '1' }], ports: [{ containerPort: 8080 }] }]));
    // A second manager (a sidecar injector, say) adds its own container and its own env var and port on the first.
    await apply(
      deploymentPath,
      'injector',
      deployment([
        { name: 'app', env: [{ name: 'TRACE', value: 'on' }], ports: [{ containerPort: 9090, name: 'metrics' }] },
        { name: 'proxy', image: 'proxy:1' },
      ]),
    );
    // The first manager applies again with a changed value: the other manager's entries stay.
    const live = await apply(
      deploymentPath,
      'operator',
      deployment([{ name: 'app', image: 'app:2', env: [{ name: 'A', value: '2' }], ports: [{ containerPort: 8080 }] }]),
    );
    const [app, proxy] = live.spec.template.spec.containers;
    expect(app.image).to.equal('app:2');
    expect(app.env).to.deep.equal([
      { name: 'A', value: '2' },
      { name: 'TRACE', value: 'on' },
    ]);
    expect(app.ports).to.deep.equal([{ containerPort: 8080 }, { containerPort: 9090, name: 'metrics' }]);
    expect(proxy).to.deep.equal({ name: 'proxy', image: 'proxy:1' });

    // An entry a manager no longer applies is removed; the other manager's entries are not.
    const after = await apply(deploymentPath, 'operator', deployment([{ name: 'app', image: 'app:2', ports: [{ containerPort: 8080 }] }]));
    expect(after.spec.template.spec.containers.map((c: { name: string }) => c.name)).to.deep.equal(['app', 'proxy']);
    expect(after.spec.template.spec.containers[0].env).to.deep.equal([{ name: 'TRACE', value: 'on' }]);
  });

  it('merges Service ports by port, and keeps other lists atomic', async () => {
    const path = '/api/v1/namespaces/a/services/web';
    const service = (ports: object[], extra: object = {}) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'a' },
      spec: { selector: { app: 'web' }, ports, ...extra },
    });
    await apply(path, 'operator', service([{ name: 'http', port: 80 }], { externalIPs: ['10.0.0.1'] }));
    const live = await apply(path, 'other', service([{ name: 'metrics', port: 9090 }], { externalIPs: ['10.0.0.2'] }));
    expect(live.spec.ports.map((p: { port: number }) => p.port)).to.deep.equal([80, 9090]);
    expect(live.spec.externalIPs).to.deep.equal(['10.0.0.2']);
  });
});
